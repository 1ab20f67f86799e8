// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/corral-dev/corral/api"
)

func pythonTemplate() map[string]any {
	return map[string]any{
		"name":        "py",
		"description": "python workers",
		"spec": map[string]any{
			"image":          map[string]any{"uri": "fake:ok"},
			"entrypoint":     []string{"python", "-m", "http.server"},
			"env":            map[string]string{"MODE": "worker", "LEVEL": "1"},
			"resourceLimits": map[string]string{"cpu": "500m", "memory": "256Mi"},
			"timeout":        900,
			"metadata":       map[string]string{"kind": "py"},
			"extensions":     map[string]string{"corral.dev/idle-timeout": "600"},
		},
	}
}

func TestTemplates(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	r := s.call("POST", "/v1/templates", s.keyB, pythonTemplate())
	var tpl api.Template
	r.decode(t, &tpl)
	if r.status != http.StatusCreated || tpl.Name != "py" || tpl.Public || strings.Join(tpl.AllowOverride, ",") != "env,metadata" {
		t.Fatalf("create = %d %s", r.status, r.body)
	}
	if r := s.call("POST", "/v1/templates", s.keyB, pythonTemplate()); r.status != http.StatusConflict || r.errCode(t) != api.CodeTemplateExists {
		t.Errorf("create again = %d %s", r.status, r.body)
	}
	// A create from it: the template's fields, the create's env and
	// metadata merged over them.
	r = s.call("POST", "/v1/sandboxes", s.keyB, map[string]any{
		"extensions": map[string]string{"corral.dev/template": "py"},
		"env":        map[string]string{"LEVEL": "2"},
		"metadata":   map[string]string{"job": "7"},
	})
	if r.status != http.StatusAccepted {
		t.Fatalf("create from the template = %d %s", r.status, r.body)
	}
	var sb api.Sandbox
	r.decode(t, &sb)
	s.call("GET", "/v1/sandboxes/"+sb.ID, s.keyB, nil).decode(t, &sb)
	rec, err := s.mgr.Get(t.Context(), "t2", sb.ID)
	if err != nil || rec.Extensions["corral.dev/template"] != "py" || rec.Extensions["corral.dev/idle-timeout"] != "600" {
		t.Errorf("the record's extensions = %v, %v", rec.Extensions, err)
	}
	if sb.Image == nil || sb.Image.URI != "fake:ok" || strings.Join(sb.Entrypoint, " ") != "python -m http.server" ||
		sb.Metadata["kind"] != "py" || sb.Metadata["job"] != "7" || sb.ExpiresAt == nil || sb.ExpiresAt.Sub(sb.CreatedAt).Seconds() != 900 {
		t.Errorf("sandbox from the template = %+v", sb)
	}
	// What the template does not allow is a 400 naming the field.
	for field, v := range map[string]any{
		"image":          map[string]any{"uri": "fake:other"},
		"timeout":        60,
		"resourceLimits": map[string]string{"cpu": "4"},
		"entrypoint":     []string{"sh"},
	} {
		body := map[string]any{"extensions": map[string]string{"corral.dev/template": "py"}, field: v}
		if r := s.call("POST", "/v1/sandboxes", s.keyB, body); r.status != 400 || r.errCode(t) != api.CodeTemplateOverride || !strings.Contains(string(r.body), field) {
			t.Errorf("overriding %s = %d %s", field, r.status, r.body)
		}
	}
	// Another tenant does not see it; a public template of an admin is
	// everyone's; a tenant's own comes first.
	if r := s.call("POST", "/v1/sandboxes", s.keyA, map[string]any{"extensions": map[string]string{"corral.dev/template": "py"}}); r.status != 400 || r.errCode(t) != api.CodeTemplateNotFound {
		t.Errorf("another tenant's template = %d %s", r.status, r.body)
	}
	if r := s.call("GET", "/v1/templates/py", s.keyA, nil); r.status != 404 {
		t.Errorf("another tenant's template = %d", r.status)
	}
	pub := pythonTemplate()
	pub["public"] = true
	pub["spec"].(map[string]any)["metadata"] = map[string]string{"kind": "public"}
	if r := s.call("POST", "/v1/templates", s.keyB, pub); r.status != 403 {
		t.Errorf("a public template without an admin key = %d", r.status)
	}
	if r := s.call("POST", "/v1/templates", s.keyA, pub); r.status != 201 {
		t.Fatalf("a public template = %d %s", r.status, r.body)
	}
	r = s.call("POST", "/v1/sandboxes", s.keyA, map[string]any{"extensions": map[string]string{"corral.dev/template": "py"}})
	var fromPub api.Sandbox
	r.decode(t, &fromPub)
	if r.status != 202 || fromPub.Metadata["kind"] != "public" {
		t.Errorf("create from the public template = %d %s", r.status, r.body)
	}
	var l api.TemplateList
	s.call("GET", "/v1/templates", s.keyB, nil).decode(t, &l)
	if len(l.Items) != 2 || l.Items[0].Public || !l.Items[1].Public {
		t.Errorf("t2's list = %+v", l.Items)
	}
	r = s.call("POST", "/v1/sandboxes", s.keyB, map[string]any{"extensions": map[string]string{"corral.dev/template": "py"}})
	var own api.Sandbox
	r.decode(t, &own)
	if own.Metadata["kind"] != "py" {
		t.Errorf("t2's own template did not come first: %s", r.body)
	}
	// Replace, then delete.
	put := pythonTemplate()
	put["allowOverride"] = []string{"timeout", "env"}
	if r := s.call("PUT", "/v1/templates/py", s.keyB, put); r.status != 200 {
		t.Errorf("replace = %d %s", r.status, r.body)
	}
	if r := s.call("POST", "/v1/sandboxes", s.keyB, map[string]any{"extensions": map[string]string{"corral.dev/template": "py"}, "timeout": 120}); r.status != 202 {
		t.Errorf("a timeout the replaced template allows = %d %s", r.status, r.body)
	}
	if r := s.call("DELETE", "/v1/templates/py", s.keyB, nil); r.status != 204 {
		t.Errorf("delete = %d", r.status)
	}
	if r := s.call("DELETE", "/v1/templates/py?public=true", s.keyB, nil); r.status != 403 {
		t.Errorf("a tenant deleting a public template = %d", r.status)
	}
	if r := s.call("DELETE", "/v1/templates/py?public=true", s.keyA, nil); r.status != 204 {
		t.Errorf("an admin deleting a public template = %d", r.status)
	}
	if r := s.call("GET", "/v1/templates/py", s.keyB, nil); r.status != 404 {
		t.Errorf("after delete = %d", r.status)
	}
}

func TestTemplateRejectsBadInput(t *testing.T) {
	t.Parallel()
	s := newTS(t)
	for body, code := range map[string]string{
		`{"name":"Bad Name","spec":{"image":{"uri":"fake:ok"}}}`: api.CodeTemplateInvalid,
		`{"name":"","spec":{"image":{"uri":"fake:ok"}}}`:         api.CodeTemplateInvalid,
		`{"name":"x"}`:           api.CodeTemplateInvalid,
		`{"name":"x","spec":[]}`: api.CodeTemplateInvalid,
		`{"name":"x","spec":{"image":{"uri":"fake:ok"},"count":3}}`:                                        api.CodeTemplateInvalid,
		`{"name":"x","spec":{"image":{"uri":"fake:ok"},"timeout":5}}`:                                      api.CodeTemplateInvalid,
		`{"name":"x","spec":{"image":{"uri":"fake:ok"},"resourceLimits":{"cpu":"lots"}}}`:                  api.CodeTemplateInvalid,
		`{"name":"x","spec":{"image":{"uri":"fake:ok"},"extensions":{"corral.dev/template":"y"}}}`:         api.CodeTemplateInvalid,
		`{"name":"x","spec":{"image":{"uri":"fake:ok"},"metadata":{"bad key!":"v"}}}`:                      api.CodeTemplateInvalid,
		`{"name":"x","spec":{"entrypoint":["sh"]}}`:                                                        api.CodeTemplateInvalid,
		`{"name":"x","spec":{"image":{"uri":"fake:ok"}},"allowOverride":["count"]}`:                        api.CodeTemplateInvalid,
		`{"name":"x","spec":{"image":{"uri":"fake:ok"}},"warmPool":3}`:                                     api.CodeAPINotSupported, // the fake runtime keeps no pools
		`{"name":"x","spec":{"image":{"uri":"fake:ok"}},"warmPool":-1}`:                                    api.CodeTemplateInvalid,
		`{"name":"x","spec":{"image":{"uri":"fake:ok"}},"warmPool":33}`:                                    api.CodeTemplateInvalid,
		`{"name":"x","spec":{"image":{"uri":"fake:ok"}},"warmReady":1}`:                                    api.CodeTemplateInvalid,
		`{"name":"x","spec":{"image":{"uri":"fake:ok"}},"warmPool":"2"}`:                                   api.CodeInvalidRequestBody,
		`{"name":"x","spec":{"image":{"uri":"fake:ok"}},"description":"` + strings.Repeat("d", 300) + `"}`: api.CodeTemplateInvalid,
		`not json`: api.CodeInvalidRequestBody,
		``:         api.CodeInvalidRequestBody,
	} {
		if r := s.call("POST", "/v1/templates", s.keyB, body); r.status != 400 || r.errCode(t) != code {
			t.Errorf("%.70s = %d %s, want 400 %s", body, r.status, r.body, code)
		}
	}
	if r := s.call("PUT", "/v1/templates/y", s.keyB, `{"name":"x","spec":{"image":{"uri":"fake:ok"}}}`); r.status != 400 {
		t.Errorf("a name unlike the path's = %d", r.status)
	}
	var l api.TemplateList
	s.call("GET", "/v1/templates", s.keyB, nil).decode(t, &l)
	if len(l.Items) != 0 {
		t.Errorf("stored after bad input: %+v", l.Items)
	}
	// An image a create gives, when the template allows it.
	if r := s.call("POST", "/v1/templates", s.keyB, `{"name":"any","spec":{"timeout":600},"allowOverride":["image"]}`); r.status != 201 {
		t.Fatalf("a template without an image that allows one = %d %s", r.status, r.body)
	}
	if r := s.call("POST", "/v1/sandboxes", s.keyB, `{"extensions":{"corral.dev/template":"any"}}`); r.status != 400 {
		t.Errorf("a create from it without an image = %d %s", r.status, r.body)
	}
	if r := s.call("POST", "/v1/sandboxes", s.keyB, `{"extensions":{"corral.dev/template":"any"},"image":{"uri":"fake:ok"}}`); r.status != 202 {
		t.Errorf("a create from it with an image = %d %s", r.status, r.body)
	}
	for i := range maxTemplates - 1 {
		if r := s.call("POST", "/v1/templates", s.keyB, fmt.Sprintf(`{"name":"t%d","spec":{"image":{"uri":"fake:ok"}}}`, i)); r.status != 201 {
			t.Fatalf("template %d = %d %s", i, r.status, r.body)
		}
	}
	if r := s.call("POST", "/v1/templates", s.keyB, `{"name":"one-more","spec":{"image":{"uri":"fake:ok"}}}`); r.status != 409 || r.errCode(t) != api.CodeTemplateLimit {
		t.Errorf("a template past the bound = %d %s", r.status, r.body)
	}
	for _, name := range []string{"nope", "../x", "UPPER"} {
		if r := s.call("POST", "/v1/sandboxes", s.keyB, `{"extensions":{"corral.dev/template":"`+name+`"}}`); r.status != 400 || r.errCode(t) != api.CodeTemplateNotFound {
			t.Errorf("template %q = %d %s", name, r.status, r.body)
		}
	}
}
