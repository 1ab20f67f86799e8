// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sdk"
)

// apiCall sends one request to the server with a key.
func apiCall(t *testing.T, s *server, key, method, path, body string) (int, string) {
	t.Helper()
	h := map[string]string{api.HeaderAPIKey: key}
	if body != "" {
		h["Content-Type"] = "application/json"
	}
	return httpCall(t, method, s.url+path, h, body)
}

// httpCall sends one request with headers and returns the status and
// body.
func httpCall(t *testing.T, method, url string, headers map[string]string, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx(t), method, url, strings.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestOCISecretsOnDemand: code in a sandbox fetches a secret its tenant
// granted it, by name, with its session key, over the socket mounted in
// it; any other name, key, sandbox or tenant gets 403, and every request
// is in the event log.
func TestOCISecretsOnDemand(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Skip("curl is not installed on this machine (the host image runs it)")
	}
	dir := t.TempDir()
	s := startServer(t, dir, "--runtime", "oci")
	c := s.client(t)
	const value = "db-pass-5e6f7a"

	// The tenant's secrets: values go in, never come out.
	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{"PUT", "/v1/secrets/db-password", `{"value":"` + value + `"}`, 201},
		{"PUT", "/v1/secrets/db-password", `{"value":"` + value + `"}`, 200},
		{"PUT", "/v1/secrets/other", `{"value":"not-for-you"}`, 201},
		{"PUT", "/v1/secrets/bad%20name", `{"value":"x"}`, 400},
		{"PUT", "/v1/secrets/x", `{}`, 400},
		{"PUT", "/v1/secrets/x", `{"value":""}`, 400},
		{"PUT", "/v1/secrets/x", `{"value":"` + strings.Repeat("v", 70<<10) + `"}`, 400},
		{"DELETE", "/v1/secrets/nope", "", 404},
		{"POST", "/v1/secrets", `{}`, 405},
	} {
		if code, body := apiCall(t, s, testKey, tc.method, tc.path, tc.body); code != tc.want || strings.Contains(body, value) {
			t.Errorf("%s %s = %d %s, want %d", tc.method, tc.path, code, body, tc.want)
		}
	}
	if code, body := apiCall(t, s, testKey, "GET", "/v1/secrets", ""); code != 200 || !strings.Contains(body, `"name":"db-password"`) || strings.Contains(body, value) {
		t.Errorf("GET /v1/secrets = %d %s", code, body)
	}

	bad := ociCreate("host")
	bad.Extensions = map[string]string{"corral.dev/secrets": "ok,../etc"}
	if _, err := c.CreateSandbox(ctx(t), bad, sdk.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "secret name") {
		t.Errorf("create with a bad grant = %v", err)
	}
	req := ociCreate("host")
	req.Extensions = map[string]string{"corral.dev/secrets": "db-password, missing"}
	sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.CreateSandbox(ctx(t), ociCreate("host"), sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x := sandboxExecd(t, c, sb.ID)
	fetch := func(x *execd, id, name, key string) string {
		out, errOut, _ := x.run(`curl -s -w ' %{http_code}' --unix-socket "$CORRAL_SECRETS_SOCKET" -H "Corral-Session-Key: ` + key +
			`" http://corral/v1/sandboxes/` + id + `/secrets/` + name)
		return strings.TrimSpace(out + errOut)
	}
	if out := fetch(x, "$CORRAL_SANDBOX_ID", "db-password", "$CORRAL_SESSION_KEY"); !strings.Contains(out, `"value":"`+value+`"`) || !strings.HasSuffix(out, " 200") {
		t.Errorf("granted secret = %q", out)
	}
	for _, tc := range []struct{ what, id, name, key string }{
		{"a name not granted", "$CORRAL_SANDBOX_ID", "other", "$CORRAL_SESSION_KEY"},
		{"a granted name the tenant lacks", "$CORRAL_SANDBOX_ID", "missing", "$CORRAL_SESSION_KEY"},
		{"a wrong key", "$CORRAL_SANDBOX_ID", "db-password", "csk_forged"},
		{"no key", "$CORRAL_SANDBOX_ID", "db-password", ""},
		{"another sandbox's ID", other.ID, "db-password", "$CORRAL_SESSION_KEY"},
		{"another route", "$CORRAL_SANDBOX_ID", "db-password/../../..", "$CORRAL_SESSION_KEY"},
	} {
		if out := fetch(x, tc.id, tc.name, tc.key); !strings.HasSuffix(out, " 403") || strings.Contains(out, value) {
			t.Errorf("%s = %q, want 403", tc.what, out)
		}
	}
	// A sandbox granted nothing has no socket and no key.
	y := sandboxExecd(t, c, other.ID)
	if out, _, _ := y.run("ls /run/corral; env | grep CORRAL_"); strings.Contains(out, "secrets.sock") || strings.Contains(out, "CORRAL_SESSION_KEY") {
		t.Errorf("an ungranted sandbox sees %q", out)
	}
	// The socket survives a server restart (the directory is mounted).
	s.kill9(t)
	s2 := startServer(t, dir, "--runtime", "oci")
	x = sandboxExecd(t, s2.client(t), sb.ID)
	if out := fetch(x, "$CORRAL_SANDBOX_ID", "db-password", "$CORRAL_SESSION_KEY"); !strings.HasSuffix(out, " 200") {
		t.Errorf("after a server restart = %q", out)
	}
	if code, _ := apiCall(t, s2, testKey, "DELETE", "/v1/secrets/db-password", ""); code != 204 {
		t.Errorf("DELETE = %d", code)
	}
	if out := fetch(x, "$CORRAL_SANDBOX_ID", "db-password", "$CORRAL_SESSION_KEY"); !strings.HasSuffix(out, " 403") {
		t.Errorf("a deleted secret = %q", out)
	}
	if page, err := s2.client(t).SandboxEvents(ctx(t), other.ID, sdk.SandboxEventOptions{Type: "secret"}); err != nil || len(page.Items) != 0 {
		t.Errorf("requests naming another sandbox were recorded against it: %+v %v", page, err)
	}
	// Every request is in the sandbox's event log, without the value.
	deadline := time.Now().Add(5 * time.Second)
	for {
		page, err := s2.client(t).SandboxEvents(ctx(t), sb.ID, sdk.SandboxEventOptions{Type: "secret", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var reads, denied int
		var all bytes.Buffer
		for _, ev := range page.Items {
			all.WriteString(ev.Type + " " + ev.Message + " " + ev.Reason + "\n")
			switch ev.Type {
			case "secret.read":
				reads++
			case "secret.denied":
				denied++
			}
		}
		// Denials with a key that is not the sandbox's are not recorded
		// against any sandbox (whoever sent them could name any).
		if reads == 2 && denied == 3 && !strings.Contains(all.String(), value) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("secret events:\n%s", all.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
