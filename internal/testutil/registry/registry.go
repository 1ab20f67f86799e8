// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package registry serves in-process OCI registries for tests (open, or
// private with per-user repository prefixes), pushes images to them, and
// builds the layers test images are made of (the busybox layer, a tar of
// files). Tests, the Kubernetes tier's helpers (internal/kube/kubetest)
// and the Docker tier's (internal/testutil/dockertest) import it
// (internal/archtest checks).
package registry

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Start serves an in-process OCI registry on loopback until the test
// ends and returns its host:port.
func Start(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// Push pushes img to ref.
func Push(t testing.TB, ref string, img v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
}

// User is an account of a registry from StartAuth: it may read the
// repositories under its Prefixes (and push anywhere).
type User struct {
	Name, Password string
	Prefixes       []string
}

// StartAuth serves an in-process OCI registry that, like a
// private one, answers only users with HTTP Basic credentials, each for
// the repositories under its prefixes; anything else is 401. It returns
// its host:port.
func StartAuth(t testing.TB, users ...User) string {
	t.Helper()
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		repo := strings.TrimPrefix(r.URL.Path, "/v2/")
		for _, u := range users {
			if !ok || user != u.Name || pass != u.Password {
				continue
			}
			if r.URL.Path == "/v2/" || r.Method != http.MethodGet && r.Method != http.MethodHead {
				inner.ServeHTTP(w, r)
				return
			}
			for _, p := range u.Prefixes {
				if strings.HasPrefix(repo, p) {
					inner.ServeHTTP(w, r)
					return
				}
			}
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="corral test registry"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// PushAs pushes img to ref with a registry user's credentials.
func PushAs(t testing.TB, ref string, img v1.Image, user, password string) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, remote.WithAuth(authn.FromConfig(authn.AuthConfig{Username: user, Password: password}))); err != nil {
		t.Fatal(err)
	}
}
