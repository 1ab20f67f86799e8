// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package benchsrv starts the corral server a benchmark measures: built
// from this checkout into a temporary directory, serving on loopback with
// its data there, with an admin key and the SDK client for it.
package benchsrv

import (
	"bufio"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil/corraltest"
	"github.com/corral-dev/corral/sdk"
)

// AdminKey is the server's admin API key.
const AdminKey = "ck_bench-admin-key-0123456789"

// Server is a running server and what it runs from.
type Server struct {
	*corraltest.Served
	// Data is its data directory.
	Data string
	// Admin is a client with the admin key.
	Admin *sdk.Client
	dir   string
}

// Start builds corral and serves it with args (such as "--runtime",
// "oci"); Close stops it and removes everything.
func Start(args ...string) (_ *Server, err error) {
	dir, err := os.MkdirTemp("", "corral-bench-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, Data: filepath.Join(dir, "data")}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	bin, err := corraltest.Build(dir)
	if err != nil {
		return nil, err
	}
	if s.Served, err = corraltest.Serve(bin, s.Data, AdminKey, args...); err != nil {
		return nil, err
	}
	if s.Admin, err = sdk.New(sdk.WithBaseURL(s.URL), sdk.WithAPIKey(AdminKey)); err != nil {
		return nil, err
	}
	return s, nil
}

// Close stops the server, which unmounts the native runtime's tmpfs in
// its data directory, and removes its directory.
func (s *Server) Close() {
	if s.Served != nil {
		_ = s.Stop()
	}
	_ = os.RemoveAll(s.dir)
}

// Gauges reads the server's unlabelled metrics (go_goroutines,
// process_open_fds, process_resident_memory_bytes, ...); empty if it does
// not answer.
func (s *Server) Gauges() map[string]float64 {
	out := map[string]float64{}
	req, err := http.NewRequest("GET", s.URL+"/metrics", nil)
	if err != nil {
		return out
	}
	req.Header.Set(api.HeaderAPIKey, AdminKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return out
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && !strings.HasPrefix(f[0], "#") {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				out[f[0]] = v
			}
		}
	}
	return out
}
