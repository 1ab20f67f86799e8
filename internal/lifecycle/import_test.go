// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/fakedriver"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/store"
)

// importer is the fake driver with driver.Importer: it reads back the
// sandboxes whose handles it was given, and fails for the ones in fail.
type importer struct {
	*fakedriver.Driver
	handles map[string]*driver.Handle
	fail    map[string]bool
}

func (d *importer) Import(ctx context.Context, id string) (*driver.Imported, error) {
	if d.fail[id] {
		return nil, errdefs.New(errdefs.ErrUnavailable, "DOWN", "the backend does not answer")
	}
	h, ok := d.handles[id]
	if st, err := d.Inspect(ctx, id); !ok || err != nil || st.Phase != driver.PhaseRunning {
		return nil, errdefs.New(errdefs.ErrNotFound, "GONE", "not running")
	}
	return &driver.Imported{Handle: h, CreatedAt: time.Now().Add(-time.Minute), Spec: driver.Spec{
		ID: id, Tenant: "t1", Image: driver.Image{URI: "fake:ok"}, Entrypoint: []string{"x"},
		Labels: map[string]string{"team": "a"}, ExecdToken: "tok-" + id, ExpiresAt: time.Now().Add(time.Hour),
		Resources: driver.Resources{CPUMillis: 500},
	}}, nil
}

// TestImportInsteadOfSweep: a server with an empty database and a driver
// that can read sandboxes back imports the running ones as Running records
// (watched like any other), leaves alone the one it could not read, and
// sweeps only the one that ended.
func TestImportInsteadOfSweep(t *testing.T) {
	dir := t.TempDir()
	fd, err := fakedriver.New(fakedriver.Config{Dir: filepath.Join(dir, "fake")})
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	d := &importer{Driver: fd, handles: map[string]*driver.Handle{}, fail: map[string]bool{}}
	for _, id := range []string{"alive", "unreadable", "ended"} {
		h, err := d.Create(t.Context(), driver.Spec{ID: id, Tenant: "t1", Image: driver.Image{URI: "fake:ok"}})
		if err != nil {
			t.Fatal(err)
		}
		d.handles[id] = h
	}
	d.fail["unreadable"] = true
	delete(d.handles, "ended") // reads back as gone

	st, err := store.Open(t.Context(), filepath.Join(dir, "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := New(Config{Driver: d, DriverName: fakedriver.Name, Store: st, MaintainInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := m.Get(t.Context(), "t1", "alive")
	if err != nil {
		t.Fatalf("the running sandbox was not imported: %v", err)
	}
	if got.Status.State != sandbox.StateRunning || got.Metadata["team"] != "a" || got.ExecdToken != "tok-alive" ||
		got.Resources.CPUMillis != 500 || got.ExpiresAt.IsZero() || got.Image.URI != "fake:ok" {
		t.Errorf("imported record = %+v", got)
	}
	if _, err := m.Get(t.Context(), "t1", "unreadable"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get(unreadable) = %v, want not found (no record)", err)
	}
	ids := backendIDs(t, d.Driver)
	if !ids["alive"] || !ids["unreadable"] || ids["ended"] {
		t.Errorf("backend after start = %v, want alive and unreadable kept, ended swept", ids)
	}
	// Once readable, the next maintenance imports it.
	d.fail["unreadable"] = false
	m.maintain(t.Context(), 0)
	if _, err := m.Get(t.Context(), "t1", "unreadable"); err != nil {
		t.Errorf("after maintenance: %v", err)
	}
	// Imported records are watched: the sandbox ending is noticed.
	if err := d.Destroy(t.Context(), "alive"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitState(t, m, "t1", "alive", sandbox.StateFailed)
}
