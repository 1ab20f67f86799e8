// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// FuzzCreateRequest feeds arbitrary bodies through decoding and validation:
// the answer is either a valid request or an invalid-argument error, never
// a panic or another kind.
func FuzzCreateRequest(f *testing.F) {
	for _, s := range []string{
		`{"image":{"uri":"python:3.12"},"timeout":600,"resourceLimits":{"cpu":"500m","memory":"512Mi"},"entrypoint":["python"]}`,
		`{"snapshotId":"s","env":{"A":null,"B":"x"},"metadata":{"a/b":"c"}}`,
		`{"image":{"uri":"x","auth":{"username":"u"}},"platform":{"os":"linux","arch":"arm64"},"networkPolicy":{"defaultAction":"deny","egress":[{"action":"allow","target":"*.a.b"}]}}`,
		`{"image":{"uri":"x"},"timeout":null,"volumes":[{}],"extensions":{"poolRef":"p"}}`,
		`[]`, `null`, `{"image":null}`, `{"timeout":1e400}`, "\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest(http.MethodPost, "/v1/sandboxes", strings.NewReader(body))
		var in api.CreateSandboxRequest
		raw, err := decodeJSON(r, &in, false)
		if err == nil {
			var req any
			req, err = createRequest("t", &in, raw, "key")
			_ = req
		}
		if err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("body %q: error %v is not ErrInvalidArgument", body, err)
		}
	})
}
