// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// A pod that answers the controller with a redirect does not get the
// controller to carry its token anywhere.
func TestPodRequestFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	var leaked atomic.Bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Token") != "" {
			leaked.Store(true)
		}
	}))
	defer elsewhere.Close()
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	defer pod.Close()
	res, err := podRequest(t.Context(), http.MethodPost, pod.URL+"/command", "X-Token", "secret", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTemporaryRedirect || leaked.Load() {
		t.Fatalf("podRequest = %d, token sent elsewhere: %v", res.StatusCode, leaked.Load())
	}
}
