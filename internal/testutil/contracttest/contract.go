// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package contracttest validates HTTP answers against the reference
// OpenSandbox contracts (OpenAPI documents in
// ../shared/reference/opensandbox-contracts beside the repository). It is
// apart from internal/testutil so that only the tests that validate link
// the OpenAPI library. Tests import it (internal/archtest checks).
package contracttest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/corral-dev/corral/internal/testutil"
)

// Contract validates HTTP answers against one reference OpenAPI contract.
type Contract struct {
	doc    *openapi3.T
	router routers.Router
	server *url.URL
}

// The reference contracts, in ../shared/reference/opensandbox-contracts.
const (
	Lifecycle = "sandbox-lifecycle.yml"
	Execd     = "execd-api.yaml"
	Egress    = "egress-api.yaml"
)

// Load loads a reference contract from the shared directory beside
// the repository. It fails when the directory is missing: CI always has it.
func Load(t testing.TB, name string) *Contract {
	t.Helper()
	path := filepath.Join(testutil.ModuleRoot(t), "..", "shared", "reference", "opensandbox-contracts", name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("reference contract %s not found (../shared must sit beside the repository): %v", name, err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		t.Fatalf("load contract %s: %v", name, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("contract %s is invalid: %v", name, err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("route contract %s: %v", name, err)
	}
	server, err := url.Parse(doc.Servers[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	return &Contract{doc: doc, router: router, server: server}
}

// contractCache avoids reparsing a contract in every test of a package.
type contractCache struct {
	mu sync.Mutex
	m  map[string]*Contract
}

// Contracts loads each contract once.
type Contracts struct{ c contractCache }

// Get returns the named contract, loading it on first use.
func (cs *Contracts) Get(t testing.TB, name string) *Contract {
	cs.c.mu.Lock()
	defer cs.c.mu.Unlock()
	if cs.c.m == nil {
		cs.c.m = map[string]*Contract{}
	}
	if c, ok := cs.c.m[name]; ok {
		return c
	}
	c := Load(t, name)
	cs.c.m[name] = c
	return c
}

// Covers reports whether the contract documents method on path (a path
// relative to the contract's server, such as /sandboxes/x).
func (c *Contract) Covers(method, path string) bool {
	req := c.request(method, path, "")
	_, _, err := c.router.FindRoute(req)
	return err == nil
}

func (c *Contract) request(method, path, rawQuery string) *http.Request {
	u := *c.server
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery = rawQuery
	req, _ := http.NewRequest(method, u.String(), nil)
	return req
}

// ValidateResponse checks that an answer to method path?query matches the
// contract: the status must be documented, the body must match its schema.
func (c *Contract) ValidateResponse(t testing.TB, method, path, rawQuery string, status int, header http.Header, body []byte) {
	t.Helper()
	if err := c.Check(method, path, rawQuery, status, header, body); err != nil {
		t.Errorf("%s %s → %d does not match the contract: %v\nbody: %s", method, path, status, err, truncate(body))
	}
}

// Check is ValidateResponse returning the mismatch instead of failing.
func (c *Contract) Check(method, path, rawQuery string, status int, header http.Header, body []byte) error {
	req := c.request(method, path, rawQuery)
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("contract has no route for %s %s: %w", method, path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{ExcludeRequestBody: true, ExcludeRequestQueryParams: true, SkipSettingDefaults: true}}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
}

func truncate(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}
