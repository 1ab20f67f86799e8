// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package fakedriver is an in-process driver that keeps its "sandboxes" as
// small JSON files in a directory, so that a fresh instance (or a restarted
// server) finds what an earlier one created and a crash leaves evidence to
// check for leaks. Each sandbox port it exposes is a real loopback listener
// serving an echo handler, so proxies can be tested end to end. It passes
// drivertest and backs the unit tests of lifecycle and server and the
// `--runtime fake` server used by tests and benchmarks. Image URIs steer its
// behaviour: "fake:fail" fails to start, "fake:missing" is an unknown image,
// "fake:exit=N" exits with code N shortly after starting.
package fakedriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Name is the driver's name in handles and configuration.
const Name = "fake"

// exitAfter is how long a "fake:exit=N" sandbox runs before it exits.
const exitAfter = 50 * time.Millisecond

// Config configures a fake driver. The zero value is not usable: Dir is
// required.
type Config struct {
	// Dir holds the driver's state; instances sharing it share sandboxes.
	Dir string
	// CreateDelay makes every Create take at least this long, to exercise
	// concurrency and crashes in flight.
	CreateDelay time.Duration
	// Tiers are the isolation tiers it pretends to run (driver.Tierer);
	// none: it has no tiers, and its name stands for its isolation.
	Tiers []string
}

// Driver is the fake driver.
type Driver struct {
	cfg Config

	// mu guards the files under cfg.Dir and the fields below.
	mu        sync.Mutex
	endpoints map[endpointKey]*endpoint
	// changed is closed (and replaced) whenever this instance changes a
	// sandbox, to wake Wait.
	changed chan struct{}

	wg sync.WaitGroup
}

var (
	_ driver.Driver      = (*Driver)(nil)
	_ driver.Pauser      = (*Driver)(nil)
	_ driver.Snapshotter = (*Driver)(nil)
	_ driver.Consoler    = (*Driver)(nil)
	_ driver.Volumer     = (*Driver)(nil)
	_ driver.Tierer      = (*Driver)(nil)
	_ driver.Isolator    = (*Driver)(nil)
)

type endpointKey struct {
	id   string
	port int
}

type endpoint struct {
	srv  *http.Server
	addr netip.AddrPort
}

// object is the on-disk record of one fake sandbox.
type object struct {
	ID         string            `json:"id"`
	Tenant     string            `json:"tenant"`
	Labels     map[string]string `json:"labels"`
	Image      string            `json:"image"`
	Entrypoint []string          `json:"entrypoint"`
	Phase      string            `json:"phase"`
	CreatedAt  time.Time         `json:"createdAt"`
	StartedAt  time.Time         `json:"startedAt"`
	// ExitAt and ExitCode script an exit for "fake:exit=N" images.
	ExitAt   time.Time `json:"exitAt"`
	ExitCode int       `json:"exitCode"`
	// ExitedAt is set once the entrypoint has exited.
	ExitedAt time.Time `json:"exitedAt"`
	Snapshot string    `json:"snapshot,omitempty"`
	// Volumes are the named volumes it mounts; DeleteVolumes those it
	// removes when destroyed, if it made them.
	Volumes       []string `json:"volumes,omitempty"`
	DeleteVolumes []string `json:"deleteVolumes,omitempty"`
}

type snapshotObject struct {
	ID        string            `json:"id"`
	SandboxID string            `json:"sandboxId"`
	Labels    map[string]string `json:"labels"`
}

const (
	phaseCreating = "creating"
	phaseRunning  = "running"
	phasePaused   = "paused"
	phaseExited   = "exited"
)

// New returns a driver bound to cfg.Dir, creating it if needed.
func New(cfg Config) (*Driver, error) {
	if cfg.Dir == "" {
		return nil, errors.New("fakedriver: Config.Dir is required")
	}
	for _, sub := range []string{"objects", "snapshots"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("fakedriver: %w", err)
		}
	}
	return &Driver{cfg: cfg, endpoints: map[endpointKey]*endpoint{}, changed: make(chan struct{})}, nil
}

// Close stops the endpoint listeners. Sandboxes stay, as with a real backend.
func (d *Driver) Close() error {
	d.mu.Lock()
	for k, ep := range d.endpoints {
		_ = ep.srv.Close()
		delete(d.endpoints, k)
	}
	d.mu.Unlock()
	d.wg.Wait()
	return nil
}

func (d *Driver) objectPath(id string) string {
	return filepath.Join(d.cfg.Dir, "objects", id+".json")
}

func (d *Driver) snapshotPath(id string) string {
	return filepath.Join(d.cfg.Dir, "snapshots", id+".json")
}

func validID(id string) error {
	if id == "" || strings.ContainsAny(id, `/\`) || id == "." || id == ".." {
		return fmt.Errorf("sandbox id %q: %w", id, errdefs.ErrInvalidArgument)
	}
	return nil
}

// notifyLocked wakes every Wait. mu held.
func (d *Driver) notifyLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// load reads an object and applies a scripted exit that is due. mu held.
func (d *Driver) load(id string) (*object, error) {
	if err := validID(id); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	b, err := os.ReadFile(d.objectPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var o object
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("sandbox %s: corrupt state: %w", id, err)
	}
	if o.Phase == phaseRunning && !o.ExitAt.IsZero() && !time.Now().Before(o.ExitAt) {
		o.Phase, o.ExitedAt = phaseExited, o.ExitAt
		if err := writeJSON(d.objectPath(id), &o); err != nil {
			return nil, err
		}
	}
	return &o, nil
}

// Create implements driver.Driver.
func (d *Driver) Create(ctx context.Context, spec driver.Spec) (_ *driver.Handle, err error) {
	if err := validID(spec.ID); err != nil {
		return nil, err
	}
	uri := spec.Image.URI
	if spec.Snapshot == nil {
		switch {
		case uri == "":
			return nil, errdefs.New(errdefs.ErrInvalidArgument, api.CodeInvalidParameter, "image.uri is empty")
		case strings.HasPrefix(uri, "fake:missing"):
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeSandboxImageNotFound, "image %q not found", uri)
		}
	}
	d.mu.Lock()
	if spec.Snapshot != nil {
		if _, err := os.Stat(d.snapshotPath(spec.Snapshot.ID)); err != nil {
			d.mu.Unlock()
			return nil, errdefs.Newf(errdefs.ErrNotFound, api.CodeSnapshotNotFound, "snapshot %s not found", spec.Snapshot.ID)
		}
	}
	if _, err := os.Stat(d.objectPath(spec.ID)); err == nil {
		d.mu.Unlock()
		return nil, fmt.Errorf("sandbox %s: %w", spec.ID, errdefs.ErrAlreadyExists)
	}
	now := time.Now().UTC()
	o := &object{
		ID: spec.ID, Tenant: spec.Tenant, Labels: driver.BackendLabels(spec), Image: uri,
		Entrypoint: spec.Entrypoint, Phase: phaseCreating, CreatedAt: now,
	}
	if spec.Snapshot != nil {
		o.Snapshot = spec.Snapshot.ID
	}
	for _, v := range spec.Volumes {
		if v.Kind == sandbox.VolumeNamed {
			o.Volumes = append(o.Volumes, v.Claim)
			if v.DeleteWithSandbox {
				o.DeleteVolumes = append(o.DeleteVolumes, v.Claim)
			}
		}
	}
	err = d.makeVolumesLocked(spec)
	if err == nil {
		err = writeJSON(d.objectPath(spec.ID), o)
	}
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.mu.Lock()
			_ = os.Remove(d.objectPath(spec.ID))
			d.mu.Unlock()
		}
	}()

	if d.cfg.CreateDelay > 0 {
		t := time.NewTimer(d.cfg.CreateDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if strings.HasPrefix(uri, "fake:fail") {
		return nil, fmt.Errorf("start sandbox %s: the fake runtime was told to fail: %w", spec.ID, errdefs.ErrUnavailable)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	o.Phase, o.StartedAt = phaseRunning, time.Now().UTC()
	if code, ok := strings.CutPrefix(uri, "fake:exit="); ok {
		n, convErr := strconv.Atoi(code)
		if convErr != nil {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidParameter, "image %q: bad exit code", uri)
		}
		o.ExitAt, o.ExitCode = o.StartedAt.Add(exitAfter), n
	}
	if err := writeJSON(d.objectPath(spec.ID), o); err != nil {
		return nil, err
	}
	st := map[string]string{"object": spec.ID + ".json"}
	if spec.Isolation != "" {
		st["isolation"] = spec.Isolation
	}
	state, _ := json.Marshal(st)
	return &driver.Handle{ID: spec.ID, Driver: Name, Version: 1, State: state}, nil
}

// Tiers implements driver.Tierer: the tiers Config.Tiers names.
func (d *Driver) Tiers() ([]string, map[string]string) { return d.cfg.Tiers, nil }

// Isolation implements driver.Isolator: the tier the create asked for,
// else the driver's name.
func (d *Driver) Isolation(h *driver.Handle) string {
	var st map[string]string
	if h != nil && json.Unmarshal(h.State, &st) == nil && st["isolation"] != "" {
		return st["isolation"]
	}
	return Name
}

// Recover implements driver.Driver.
func (d *Driver) Recover(_ context.Context, h *driver.Handle) error {
	if h == nil || h.Driver != Name {
		return fmt.Errorf("recover: not a %s handle: %w", Name, errdefs.ErrInvalidArgument)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err := d.load(h.ID)
	return err
}

// Inspect implements driver.Driver.
func (d *Driver) Inspect(_ context.Context, id string) (driver.Status, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o, err := d.load(id)
	if err != nil {
		return driver.Status{}, err
	}
	return o.status(), nil
}

func (o *object) status() driver.Status {
	st := driver.Status{StartedAt: o.StartedAt}
	switch o.Phase {
	case phaseCreating:
		st.Phase = driver.PhaseCreating
	case phaseRunning:
		st.Phase = driver.PhaseRunning
	case phasePaused:
		st.Phase = driver.PhasePaused
	default:
		st.Phase = driver.PhaseExited
		st.Exit = &driver.Exit{Code: o.ExitCode, At: o.ExitedAt}
	}
	return st
}

// Wait implements driver.Driver. Changes made by this instance wake it at
// once; changes made behind its back (another instance, a test removing a
// file) are noticed by a slow poll, which keeps a server with thousands of
// fake sandboxes cheap.
func (d *Driver) Wait(ctx context.Context, id string) (driver.Exit, error) {
	const poll = time.Second
	for {
		d.mu.Lock()
		changed := d.changed
		o, err := d.load(id)
		d.mu.Unlock()
		if err != nil {
			return driver.Exit{}, err
		}
		st := o.status()
		if st.Exit != nil {
			return *st.Exit, nil
		}
		wait := poll
		if o.Phase == phaseRunning && !o.ExitAt.IsZero() {
			wait = min(wait, time.Until(o.ExitAt))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return driver.Exit{}, ctx.Err()
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// Stop implements driver.Driver: the fake entrypoint dies of SIGTERM.
func (d *Driver) Stop(_ context.Context, id string, _ time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	o, err := d.load(id)
	if err != nil {
		return err
	}
	d.closeEndpointsLocked(id)
	if o.Phase == phaseExited {
		return nil
	}
	o.Phase, o.ExitCode, o.ExitedAt = phaseExited, 143, time.Now().UTC()
	defer d.notifyLocked()
	return writeJSON(d.objectPath(id), o)
}

// Destroy implements driver.Driver.
func (d *Driver) Destroy(_ context.Context, id string) error {
	if validID(id) != nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closeEndpointsLocked(id)
	defer d.notifyLocked()
	o, _ := d.load(id)
	err := os.Remove(d.objectPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil && o != nil {
		for _, name := range o.DeleteVolumes {
			if rerr := d.removeVolumeLocked(o.Tenant, name, id); rerr != nil && !errors.Is(rerr, errdefs.ErrNotFound) && !errors.Is(rerr, errdefs.ErrFailedPrecondition) {
				err = rerr
			}
		}
	}
	return err
}

func (d *Driver) closeEndpointsLocked(id string) {
	for k, ep := range d.endpoints {
		if k.id == id {
			_ = ep.srv.Close()
			delete(d.endpoints, k)
		}
	}
}

// Endpoint implements driver.Driver: every (sandbox, port) gets its own
// loopback listener serving the echo handler.
func (d *Driver) Endpoint(_ context.Context, id string, port int) (netip.AddrPort, error) {
	if port < 1 || port > 65535 {
		return netip.AddrPort{}, fmt.Errorf("port %d: %w", port, errdefs.ErrInvalidArgument)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	o, err := d.load(id)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if o.Phase == phaseExited {
		return netip.AddrPort{}, fmt.Errorf("sandbox %s has exited: %w", id, errdefs.ErrFailedPrecondition)
	}
	key := endpointKey{id, port}
	if ep, ok := d.endpoints[key]; ok {
		return ep.addr, nil
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("endpoint: %w", err)
	}
	ep := &endpoint{
		srv:  &http.Server{Handler: echoHandler(id, port), ReadHeaderTimeout: 10 * time.Second},
		addr: ln.Addr().(*net.TCPAddr).AddrPort(),
	}
	d.endpoints[key] = ep
	d.wg.Go(func() { _ = ep.srv.Serve(ln) })
	return ep.addr, nil
}

// List implements driver.Driver.
func (d *Driver) List(_ context.Context) ([]driver.Listing, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	entries, err := os.ReadDir(filepath.Join(d.cfg.Dir, "objects"))
	if err != nil {
		return nil, err
	}
	var out []driver.Listing
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		o, err := d.load(id)
		if errors.Is(err, errdefs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, driver.Listing{ID: o.ID, Tenant: o.Tenant, CreatedAt: o.CreatedAt, Labels: o.Labels})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Pause implements driver.Pauser.
func (d *Driver) Pause(_ context.Context, id string) error {
	return d.transition(id, phaseRunning, phasePaused)
}

// Resume implements driver.Pauser.
func (d *Driver) Resume(_ context.Context, id string) error {
	return d.transition(id, phasePaused, phaseRunning)
}

func (d *Driver) transition(id, from, to string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	o, err := d.load(id)
	if err != nil {
		return err
	}
	if o.Phase != from {
		return fmt.Errorf("sandbox %s is %s, not %s: %w", id, o.Phase, from, errdefs.ErrFailedPrecondition)
	}
	o.Phase = to
	defer d.notifyLocked()
	return writeJSON(d.objectPath(id), o)
}

// Snapshot implements driver.Snapshotter.
func (d *Driver) Snapshot(_ context.Context, id, snapshotID string) (*driver.SnapshotRef, error) {
	if err := validID(snapshotID); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	o, err := d.load(id)
	if err != nil {
		return nil, err
	}
	if o.Phase != phaseRunning {
		return nil, fmt.Errorf("sandbox %s is %s: %w", id, o.Phase, errdefs.ErrFailedPrecondition)
	}
	labels := map[string]string{sandbox.LabelManaged: "true", "corral.dev/snapshot-id": snapshotID, sandbox.LabelSandboxID: id}
	if err := writeJSON(d.snapshotPath(snapshotID), &snapshotObject{ID: snapshotID, SandboxID: id, Labels: labels}); err != nil {
		return nil, err
	}
	return &driver.SnapshotRef{ID: snapshotID, Driver: Name, Version: 1, Labels: labels, Bytes: FakeSnapshotBytes}, nil
}

// FakeSnapshotBytes is the size every fake snapshot reports.
const FakeSnapshotBytes = 1 << 20

// Console implements driver.Consoler. A fake sandbox's console is the line
// a shell would echo for its entrypoint (and its exit, once it exited).
func (d *Driver) Console(_ context.Context, id string, limit int) ([]byte, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o, err := d.load(id)
	if err != nil {
		return nil, false, err
	}
	out := "$ " + strings.Join(o.Entrypoint, " ") + "\n"
	if !o.ExitedAt.IsZero() {
		out += fmt.Sprintf("exited with code %d\n", o.ExitCode)
	}
	if len(out) > limit {
		return []byte(out[len(out)-limit:]), true, nil
	}
	return []byte(out), false, nil
}

// RemoveSnapshot implements driver.Snapshotter.
func (d *Driver) RemoveSnapshot(_ context.Context, ref *driver.SnapshotRef) error {
	if ref == nil || validID(ref.ID) != nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	err := os.Remove(d.snapshotPath(ref.ID))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// ListSnapshots implements driver.Snapshotter.
func (d *Driver) ListSnapshots(_ context.Context) ([]driver.SnapshotRef, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	entries, err := os.ReadDir(filepath.Join(d.cfg.Dir, "snapshots"))
	if err != nil {
		return nil, err
	}
	var out []driver.SnapshotRef
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d.cfg.Dir, "snapshots", e.Name()))
		if err != nil {
			continue
		}
		var s snapshotObject
		if json.Unmarshal(b, &s) == nil {
			out = append(out, driver.SnapshotRef{ID: s.ID, Driver: Name, Version: 1, Labels: s.Labels})
		}
	}
	return out, nil
}
