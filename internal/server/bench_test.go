// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/corral-dev/corral/api"
)

// BenchmarkGetSandboxHandler measures the server's own cost of a GET,
// without the network: middlewares, auth, lookup and encoding.
func BenchmarkGetSandboxHandler(b *testing.B) {
	s := newTSForBench(b)
	id := s.create(s.keyA, basicCreate()).ID
	h := s.handler
	req := httptest.NewRequest(http.MethodGet, "/v1/sandboxes/"+id, nil)
	req.Header.Set(api.HeaderAPIKey, s.keyA)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}
