// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package drivertest is the conformance suite of the driver contract. Every
// driver, the fake included, calls Run from one test. Only _test.go files
// import it.
package drivertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Harness builds drivers for Run.
type Harness struct {
	// New returns a fresh driver bound to the same backend and state
	// directory on every call, so the suite can simulate restarts.
	New func(t *testing.T) driver.Driver
	// Spec returns the smallest runnable sandbox for this backend. The suite
	// sets ID and Tenant.
	Spec func(t *testing.T) driver.Spec
	// ExitSpec, when set, returns a sandbox whose entrypoint exits with code
	// soon after it starts.
	ExitSpec func(t *testing.T, code int) driver.Spec
	// Kill removes a sandbox behind the driver's back.
	Kill func(t *testing.T, id string)
	// NoHostVolumes: the runtime refuses host volumes (ErrInvalidArgument),
	// as a remote Docker engine's, whose host is another machine.
	NoHostVolumes bool
	// NoPrograms: the backend runs no program (the fake driver), so a
	// console shows no output the entrypoint makes as it runs.
	NoPrograms bool
}

type suite struct {
	h      Harness
	tenant string
}

// Run runs the conformance suite. It ends with a leak check: nothing the
// suite created may still be listed.
func Run(t *testing.T, h Harness) {
	s := &suite{h: h, tenant: "drivertest-" + randHex(4)}
	t.Run("Create/Inspect", s.createInspect)
	t.Run("Create/DuplicateID", s.createDuplicate)
	t.Run("Create/CanceledLeavesNoOrphan", s.createCanceled)
	t.Run("Inspect/Unknown", s.inspectUnknown)
	t.Run("Endpoint/Unknown", s.endpointUnknown)
	t.Run("Stop/ThenWait", s.stopThenWait)
	t.Run("Stop/Idempotent", s.stopIdempotent)
	t.Run("Wait/UnblocksOnStop", s.waitUnblocks)
	t.Run("Destroy/Idempotent", s.destroyIdempotent)
	t.Run("Destroy/Unknown", s.destroyUnknown)
	t.Run("Recover/NewInstance", s.recoverNewInstance)
	t.Run("Recover/Twice", s.recoverTwice)
	t.Run("Recover/Gone", s.recoverGone)
	t.Run("List/TracksCreateAndDestroy", s.listTracks)
	if h.ExitSpec != nil {
		t.Run("Exit/CodePropagates", s.exitCode)
		t.Run("Exit/CodeSurvivesARestart", s.exitCodeRestart)
	}
	if _, ok := h.New(t).(driver.Pauser); ok {
		t.Run("Pause/PauseResume", s.pauseResume)
		t.Run("Pause/SurvivesRecover", s.pauseRecover)
	}
	if _, ok := h.New(t).(driver.Snapshotter); ok {
		t.Run("Snapshot/CreateRestoreRemove", s.snapshot)
	}
	if _, ok := h.New(t).(driver.Volumer); ok {
		t.Run("Volume/NamedSharedScopedRemoved", s.volumes)
	}
	if _, ok := h.New(t).(driver.Consoler); ok {
		t.Run("Console/KeepsTheEntrypointsOutput", s.console)
		if !h.NoPrograms {
			t.Run("Console/GoesOnAcrossARestart", s.consoleRestart)
		}
	}
	t.Run("Leaks", s.leaks)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// spec returns a fresh spec with a new ID whose backend objects the test
// cleans up.
func (s *suite) spec(t *testing.T, d driver.Driver) driver.Spec {
	t.Helper()
	sp := s.h.Spec(t)
	sp.ID = "dt" + randHex(8)
	sp.Tenant = s.tenant
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
		defer cancel()
		if err := d.Destroy(ctx, sp.ID); err != nil {
			t.Errorf("cleanup: Destroy(%s) = %v", sp.ID, err)
		}
	})
	return sp
}

func (s *suite) create(t *testing.T, d driver.Driver) (driver.Spec, *driver.Handle) {
	t.Helper()
	sp := s.spec(t, d)
	h, err := d.Create(ctxT(t), sp)
	if err != nil {
		t.Fatalf("Create(%s) = %v", sp.ID, err)
	}
	if h == nil || h.ID != sp.ID || h.Driver == "" {
		t.Fatalf("Create(%s) handle = %+v, want ID %s and a driver name", sp.ID, h, sp.ID)
	}
	return sp, h
}

func wantPhase(t *testing.T, d driver.Driver, id string, want driver.Phase) {
	t.Helper()
	st, err := d.Inspect(ctxT(t), id)
	if err != nil {
		t.Fatalf("Inspect(%s) = %v", id, err)
	}
	if st.Phase != want {
		t.Fatalf("Inspect(%s).Phase = %v, want %v", id, st.Phase, want)
	}
}

func (s *suite) createInspect(t *testing.T) {
	d := s.h.New(t)
	sp, _ := s.create(t, d)
	wantPhase(t, d, sp.ID, driver.PhaseRunning)
	st, _ := d.Inspect(ctxT(t), sp.ID)
	if st.StartedAt.IsZero() {
		t.Errorf("Inspect(%s).StartedAt is zero", sp.ID)
	}
}

func (s *suite) createDuplicate(t *testing.T) {
	d := s.h.New(t)
	sp, _ := s.create(t, d)
	if _, err := d.Create(ctxT(t), sp); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("second Create(%s) = %v, want ErrAlreadyExists", sp.ID, err)
	}
	wantPhase(t, d, sp.ID, driver.PhaseRunning)
}

func (s *suite) createCanceled(t *testing.T) {
	d := s.h.New(t)
	sp := s.spec(t, d)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := d.Create(ctx, sp); err == nil {
		t.Fatalf("Create with a canceled context succeeded")
	}
	ls, err := d.List(ctxT(t))
	if err != nil {
		t.Fatalf("List = %v", err)
	}
	for _, l := range ls {
		if l.ID == sp.ID {
			t.Fatalf("canceled Create left %s behind", sp.ID)
		}
	}
}

func (s *suite) inspectUnknown(t *testing.T) {
	d := s.h.New(t)
	if _, err := d.Inspect(ctxT(t), "dt"+randHex(8)); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Inspect(unknown) = %v, want ErrNotFound", err)
	}
}

func (s *suite) endpointUnknown(t *testing.T) {
	d := s.h.New(t)
	if _, err := d.Endpoint(ctxT(t), "dt"+randHex(8), insandbox.ExecdPort); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Endpoint(unknown) = %v, want ErrNotFound", err)
	}
}

func (s *suite) stopThenWait(t *testing.T) {
	d := s.h.New(t)
	sp, _ := s.create(t, d)
	if err := d.Stop(ctxT(t), sp.ID, 2*time.Second); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	if _, err := d.Wait(ctxT(t), sp.ID); err != nil {
		t.Fatalf("Wait after Stop = %v", err)
	}
	wantPhase(t, d, sp.ID, driver.PhaseExited)
}

func (s *suite) stopIdempotent(t *testing.T) {
	d := s.h.New(t)
	sp, _ := s.create(t, d)
	for i := range 2 {
		if err := d.Stop(ctxT(t), sp.ID, 2*time.Second); err != nil {
			t.Fatalf("Stop #%d = %v", i+1, err)
		}
	}
}

func (s *suite) waitUnblocks(t *testing.T) {
	d := s.h.New(t)
	sp, _ := s.create(t, d)
	done := make(chan error, 1)
	go func() {
		_, err := d.Wait(ctxT(t), sp.ID)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Wait returned before Stop: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := d.Stop(ctxT(t), sp.ID, 2*time.Second); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait = %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("Wait did not return after Stop")
	}
}

func (s *suite) destroyIdempotent(t *testing.T) {
	d := s.h.New(t)
	sp, _ := s.create(t, d)
	for i := range 2 {
		if err := d.Destroy(ctxT(t), sp.ID); err != nil {
			t.Fatalf("Destroy #%d = %v", i+1, err)
		}
	}
	if _, err := d.Inspect(ctxT(t), sp.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Inspect after Destroy = %v, want ErrNotFound", err)
	}
}

func (s *suite) destroyUnknown(t *testing.T) {
	d := s.h.New(t)
	if err := d.Destroy(ctxT(t), "dt"+randHex(8)); err != nil {
		t.Fatalf("Destroy(unknown) = %v, want nil", err)
	}
}

func (s *suite) recoverNewInstance(t *testing.T) {
	d1 := s.h.New(t)
	sp, h := s.create(t, d1)
	d2 := s.h.New(t)
	if err := d2.Recover(ctxT(t), h); err != nil {
		t.Fatalf("Recover on a new instance = %v", err)
	}
	wantPhase(t, d2, sp.ID, driver.PhaseRunning)
	if _, err := d2.Endpoint(ctxT(t), sp.ID, insandbox.ExecdPort); err != nil {
		t.Fatalf("Endpoint after Recover = %v", err)
	}
	if err := d2.Stop(ctxT(t), sp.ID, 2*time.Second); err != nil {
		t.Fatalf("Stop after Recover = %v", err)
	}
	if _, err := d2.Wait(ctxT(t), sp.ID); err != nil {
		t.Fatalf("Wait after Recover = %v", err)
	}
	if err := d2.Destroy(ctxT(t), sp.ID); err != nil {
		t.Fatalf("Destroy after Recover = %v", err)
	}
}

func (s *suite) recoverTwice(t *testing.T) {
	d1 := s.h.New(t)
	sp, h := s.create(t, d1)
	d2 := s.h.New(t)
	for i := range 2 {
		if err := d2.Recover(ctxT(t), h); err != nil {
			t.Fatalf("Recover #%d = %v", i+1, err)
		}
	}
	wantPhase(t, d2, sp.ID, driver.PhaseRunning)
}

func (s *suite) recoverGone(t *testing.T) {
	d1 := s.h.New(t)
	sp, h := s.create(t, d1)
	s.h.Kill(t, sp.ID)
	d2 := s.h.New(t)
	if err := d2.Recover(ctxT(t), h); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Recover of a killed sandbox = %v, want ErrNotFound", err)
	}
}

func (s *suite) listTracks(t *testing.T) {
	d := s.h.New(t)
	sp, _ := s.create(t, d)
	find := func() *driver.Listing {
		ls, err := d.List(ctxT(t))
		if err != nil {
			t.Fatalf("List = %v", err)
		}
		for i := range ls {
			if ls[i].ID == sp.ID {
				return &ls[i]
			}
		}
		return nil
	}
	l := find()
	if l == nil {
		t.Fatalf("List does not report %s after Create", sp.ID)
	}
	if l.Tenant != s.tenant || l.Labels[sandbox.LabelManaged] != "true" || l.Labels[sandbox.LabelSandboxID] != sp.ID {
		t.Errorf("List entry = %+v, want tenant %s and the corral.dev labels", *l, s.tenant)
	}
	for k, v := range sp.Labels {
		if l.Labels[k] != v {
			t.Errorf("List entry label %s = %q, want %q", k, l.Labels[k], v)
		}
	}
	if err := d.Destroy(ctxT(t), sp.ID); err != nil {
		t.Fatalf("Destroy = %v", err)
	}
	if l := find(); l != nil {
		t.Fatalf("List still reports %s after Destroy", sp.ID)
	}
}

func (s *suite) exitCode(t *testing.T) {
	d := s.h.New(t)
	sp := s.h.ExitSpec(t, 3)
	base := s.spec(t, d)
	sp.ID, sp.Tenant = base.ID, base.Tenant
	if _, err := d.Create(ctxT(t), sp); err != nil {
		t.Fatalf("Create = %v", err)
	}
	exit, err := d.Wait(ctxT(t), sp.ID)
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	if exit.Code != 3 {
		t.Fatalf("Wait().Code = %d, want 3", exit.Code)
	}
	wantPhase(t, d, sp.ID, driver.PhaseExited)
}

// exitCodeRestart: an entrypoint that exits while no server runs (its
// driver closed) still has its code reported by the next one.
func (s *suite) exitCodeRestart(t *testing.T) {
	// The test's cleanup goes through an instance that stays open.
	base := s.spec(t, s.h.New(t))
	d1 := s.h.New(t)
	sp := s.h.ExitSpec(t, 5)
	sp.ID, sp.Tenant = base.ID, base.Tenant
	h, err := d1.Create(ctxT(t), sp)
	if err != nil {
		t.Fatalf("Create = %v", err)
	}
	if c, ok := d1.(io.Closer); ok {
		if err := c.Close(); err != nil {
			t.Fatalf("Close = %v", err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // the entrypoint exits meanwhile
	d2 := s.h.New(t)
	if err := d2.Recover(ctxT(t), h); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Recover = %v", err)
	}
	exit, err := d2.Wait(ctxT(t), sp.ID)
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	if exit.Code != 5 {
		t.Fatalf("Wait().Code after a restart = %d (%s), want 5", exit.Code, exit.Reason)
	}
	wantPhase(t, d2, sp.ID, driver.PhaseExited)
	if err := d2.Destroy(ctxT(t), sp.ID); err != nil {
		t.Fatalf("Destroy = %v", err)
	}
}

// console: what the entrypoint prints can be read back, its end when
// bounded; an unknown sandbox is not found.
func (s *suite) console(t *testing.T) {
	d := s.h.New(t)
	c := d.(driver.Consoler)
	sp := s.spec(t, d)
	mark := "console-" + randHex(6)
	sp.Entrypoint = []string{"sh", "-c", "echo " + mark + "; echo last-line; exec sleep 3600"}
	if _, err := d.Create(ctxT(t), sp); err != nil {
		t.Fatalf("Create = %v", err)
	}
	var out []byte
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		var err error
		if out, _, err = c.Console(ctxT(t), sp.ID, 1<<20); err != nil {
			t.Fatalf("Console = %v", err)
		}
		if bytes.Contains(out, []byte(mark)) && bytes.Contains(out, []byte("last-line")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console never showed what the entrypoint printed: %q", out)
		}
	}
	tail, truncated, err := c.Console(ctxT(t), sp.ID, 5)
	// The console only grows meanwhile (init and execd log to it too): the
	// tail is the end of the console as it was at some moment between the
	// read before and the read after.
	after, _, aerr := c.Console(ctxT(t), sp.ID, 1<<20)
	ended := false
	for k := len(out); aerr == nil && k <= len(after) && !ended; k++ {
		ended = bytes.HasPrefix(after, out) && bytes.Equal(after[k-5:k], tail)
	}
	if err != nil || len(tail) != 5 || !truncated || !ended {
		t.Errorf("Console(5) = %q, %v, %v; want the last 5 bytes of the console, which grew from %q to %q (%v), truncated", tail, truncated, err, out, after, aerr)
	}
	if _, _, err := c.Console(ctxT(t), "dt"+randHex(8), 100); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Console of an unknown sandbox = %v, want ErrNotFound", err)
	}
}

// consoleRestart: a sandbox that prints all the time goes on running and
// printing when the server stops (its driver closed) and another one
// recovers it: nothing it runs dies for want of a reader meanwhile, and
// the new instance keeps its console.
func (s *suite) consoleRestart(t *testing.T) {
	// The test's cleanup goes through an instance that stays open.
	sp := s.spec(t, s.h.New(t))
	d1 := s.h.New(t)
	sp.Entrypoint = []string{"sh", "-c", "i=0; while :; do i=$((i+1)); echo tick-$i; sleep 0.02; done"}
	h, err := d1.Create(ctxT(t), sp)
	if err != nil {
		t.Fatalf("Create = %v", err)
	}
	ticks := func(d driver.Driver) int {
		out, _, err := d.(driver.Consoler).Console(ctxT(t), sp.ID, 4096)
		if err != nil {
			t.Fatalf("Console = %v", err)
		}
		last := 0
		for _, f := range bytes.Fields(out) {
			if n, err := strconv.Atoi(string(bytes.TrimPrefix(f, []byte("tick-")))); err == nil && bytes.HasPrefix(f, []byte("tick-")) {
				last = n
			}
		}
		return last
	}
	waitTicks := func(d driver.Driver, past int) int {
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			if n := ticks(d); n > past {
				return n
			}
			if time.Now().After(deadline) {
				t.Fatalf("the console shows no tick past %d", past)
			}
		}
	}
	before := waitTicks(d1, 0)
	if c, ok := d1.(io.Closer); ok {
		if err := c.Close(); err != nil {
			t.Fatalf("Close = %v", err)
		}
	}
	// The sandbox prints for a while with no server to read it.
	time.Sleep(300 * time.Millisecond)
	d2 := s.h.New(t)
	if err := d2.Recover(ctxT(t), h); err != nil {
		t.Fatalf("Recover = %v", err)
	}
	wantPhase(t, d2, sp.ID, driver.PhaseRunning)
	seen := ticks(d2)
	if n := waitTicks(d2, max(before, seen)); n <= before {
		t.Fatalf("tick %d after the restart, %d before", n, before)
	}
	wantPhase(t, d2, sp.ID, driver.PhaseRunning)
	// By the instance that runs it now (the first one is closed).
	if err := d2.Destroy(ctxT(t), sp.ID); err != nil {
		t.Fatalf("Destroy = %v", err)
	}
}

func (s *suite) pauseResume(t *testing.T) {
	d := s.h.New(t)
	p := d.(driver.Pauser)
	sp, _ := s.create(t, d)
	if err := p.Pause(ctxT(t), sp.ID); err != nil {
		t.Fatalf("Pause = %v", err)
	}
	wantPhase(t, d, sp.ID, driver.PhasePaused)
	if err := p.Pause(ctxT(t), sp.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Pause of a paused sandbox = %v, want ErrFailedPrecondition", err)
	}
	if err := p.Resume(ctxT(t), sp.ID); err != nil {
		t.Fatalf("Resume = %v", err)
	}
	wantPhase(t, d, sp.ID, driver.PhaseRunning)
	if err := p.Resume(ctxT(t), sp.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Resume of a running sandbox = %v, want ErrFailedPrecondition", err)
	}
	if err := p.Pause(ctxT(t), "dt"+randHex(8)); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Pause(unknown) = %v, want ErrNotFound", err)
	}
}

func (s *suite) pauseRecover(t *testing.T) {
	d1 := s.h.New(t)
	sp, h := s.create(t, d1)
	if err := d1.(driver.Pauser).Pause(ctxT(t), sp.ID); err != nil {
		t.Fatalf("Pause = %v", err)
	}
	d2 := s.h.New(t)
	if err := d2.Recover(ctxT(t), h); err != nil {
		t.Fatalf("Recover = %v", err)
	}
	wantPhase(t, d2, sp.ID, driver.PhasePaused)
	if err := d2.(driver.Pauser).Resume(ctxT(t), sp.ID); err != nil {
		t.Fatalf("Resume after Recover = %v", err)
	}
	wantPhase(t, d2, sp.ID, driver.PhaseRunning)
	// A paused sandbox must also be destroyable.
	if err := d2.(driver.Pauser).Pause(ctxT(t), sp.ID); err != nil {
		t.Fatalf("Pause = %v", err)
	}
	if err := d2.Destroy(ctxT(t), sp.ID); err != nil {
		t.Fatalf("Destroy of a paused sandbox = %v", err)
	}
}

func (s *suite) snapshot(t *testing.T) {
	d := s.h.New(t)
	sn := d.(driver.Snapshotter)
	sp, _ := s.create(t, d)
	snapID := "dts" + randHex(8)
	ref, err := sn.Snapshot(ctxT(t), sp.ID, snapID)
	if err != nil {
		t.Fatalf("Snapshot = %v", err)
	}
	t.Cleanup(func() {
		if err := sn.RemoveSnapshot(context.WithoutCancel(t.Context()), ref); err != nil {
			t.Errorf("cleanup: RemoveSnapshot = %v", err)
		}
	})
	refs, err := sn.ListSnapshots(ctxT(t))
	if err != nil {
		t.Fatalf("ListSnapshots = %v", err)
	}
	found := false
	for _, r := range refs {
		found = found || r.ID == snapID
	}
	if !found {
		t.Fatalf("ListSnapshots does not report %s", snapID)
	}
	restored := s.spec(t, d)
	restored.Snapshot = ref
	if _, err := d.Create(ctxT(t), restored); err != nil {
		t.Fatalf("Create from snapshot = %v", err)
	}
	wantPhase(t, d, restored.ID, driver.PhaseRunning)
	for i := range 2 {
		if err := sn.RemoveSnapshot(ctxT(t), ref); err != nil {
			t.Fatalf("RemoveSnapshot #%d = %v", i+1, err)
		}
	}
	refs, _ = sn.ListSnapshots(ctxT(t))
	for _, r := range refs {
		if r.ID == snapID {
			t.Fatalf("ListSnapshots still reports %s after RemoveSnapshot", snapID)
		}
	}
}

func (s *suite) volumes(t *testing.T) {
	d := s.h.New(t)
	vd := d.(driver.Volumer)
	claim, gone := "dtv"+randHex(4), "dtw"+randHex(4)
	named := func(claim string, create, deleteWith bool) sandbox.Volume {
		return sandbox.Volume{Name: "v", Kind: sandbox.VolumeNamed, Claim: claim, Create: create, DeleteWithSandbox: deleteWith, Target: "/mnt/v"}
	}
	host := sandbox.Volume{Name: "h", Kind: sandbox.VolumeHost, HostPath: t.TempDir(), Target: "/mnt/h", ReadOnly: true}
	host.Resolved = host.HostPath
	sp1 := s.spec(t, d)
	sp1.Volumes = []sandbox.Volume{named(claim, true, false), host}
	if s.h.NoHostVolumes {
		if _, err := d.Create(ctxT(t), sp1); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("Create with a host volume = %v, want ErrInvalidArgument on this runtime", err)
		}
		if vols, _ := vd.ListVolumes(ctxT(t), s.tenant); len(vols) != 0 {
			t.Fatalf("a failed create left volumes %+v", vols)
		}
		sp1.Volumes = sp1.Volumes[:1]
	}
	if _, err := d.Create(ctxT(t), sp1); err != nil {
		t.Fatalf("Create with a new named volume and a host volume = %v", err)
	}
	sp2 := s.spec(t, d)
	sp2.Volumes = []sandbox.Volume{named(claim, false, false)}
	if _, err := d.Create(ctxT(t), sp2); err != nil {
		t.Fatalf("Create with the tenant's existing named volume = %v", err)
	}
	other := s.spec(t, d)
	other.Tenant = s.tenant + "-other"
	other.Volumes = []sandbox.Volume{named(claim, false, false)}
	if _, err := d.Create(ctxT(t), other); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("Create with another tenant's volume name (createIfNotExists false) = %v, want ErrInvalidArgument", err)
	}
	vols, err := vd.ListVolumes(ctxT(t), s.tenant)
	if err != nil {
		t.Fatalf("ListVolumes = %v", err)
	}
	var users []string
	for _, v := range vols {
		if v.Name == claim {
			users = v.InUseBy
		}
	}
	if !slices.Contains(users, sp1.ID) || !slices.Contains(users, sp2.ID) {
		t.Fatalf("ListVolumes = %+v, want %s used by %s and %s", vols, claim, sp1.ID, sp2.ID)
	}
	if vols, _ := vd.ListVolumes(ctxT(t), other.Tenant); len(vols) != 0 {
		t.Fatalf("another tenant's ListVolumes = %+v, want none", vols)
	}
	if err := vd.RemoveVolume(ctxT(t), s.tenant, claim); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("RemoveVolume of a mounted volume = %v, want ErrFailedPrecondition", err)
	}
	if err := vd.RemoveVolume(ctxT(t), other.Tenant, claim); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("RemoveVolume by another tenant = %v, want ErrNotFound", err)
	}
	for _, id := range []string{sp1.ID, sp2.ID} {
		if err := d.Destroy(ctxT(t), id); err != nil {
			t.Fatal(err)
		}
	}
	if err := vd.RemoveVolume(ctxT(t), s.tenant, claim); err != nil {
		t.Fatalf("RemoveVolume = %v", err)
	}
	if err := vd.RemoveVolume(ctxT(t), s.tenant, claim); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("RemoveVolume twice = %v, want ErrNotFound", err)
	}
	sp3 := s.spec(t, d)
	sp3.Volumes = []sandbox.Volume{named(gone, true, true)}
	if _, err := d.Create(ctxT(t), sp3); err != nil {
		t.Fatal(err)
	}
	if err := d.Destroy(ctxT(t), sp3.ID); err != nil {
		t.Fatal(err)
	}
	vols, _ = vd.ListVolumes(ctxT(t), s.tenant)
	for _, v := range vols {
		if v.Name == gone {
			t.Fatalf("a volume made to go with its sandbox outlived it")
		}
	}
}

func (s *suite) leaks(t *testing.T) {
	d := s.h.New(t)
	ls, err := d.List(ctxT(t))
	if err != nil {
		t.Fatalf("List = %v", err)
	}
	for _, l := range ls {
		if l.Tenant == s.tenant {
			t.Errorf("leak: sandbox %s is still on the backend after the suite", l.ID)
		}
	}
}
