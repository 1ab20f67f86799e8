// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package process

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/testutil"
)

func TestRing(t *testing.T) {
	t.Parallel()
	var r ring
	if b, off := r.since(0); b != nil || off != 0 {
		t.Errorf("empty since(0) = %q, %d; want nothing at 0", b, off)
	}
	r.write([]byte("hello "))
	r.write([]byte("world"))
	for _, tc := range []struct {
		name    string
		from    int64
		want    string
		wantOff int64
	}{
		{"from the start", 0, "hello world", 0},
		{"from the middle", 6, "world", 6},
		{"at the end", 11, "", 11},
		{"past the end", 99, "", 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, off := r.since(tc.from)
			if string(b) != tc.want || off != tc.wantOff {
				t.Errorf("since(%d) = %q, %d; want %q, %d", tc.from, b, off, tc.want, tc.wantOff)
			}
		})
	}

	// Past its size the ring keeps the newest bytes, and an offset it no
	// longer holds replays from the oldest one it does.
	big := bytes.Repeat([]byte("x"), ptyRingSize)
	r.write(big)
	r.write([]byte("tail"))
	total := int64(11 + ptyRingSize + 4)
	if r.total != total || len(r.buf) != ptyRingSize {
		t.Fatalf("after overflow total = %d, kept %d; want %d, %d", r.total, len(r.buf), total, ptyRingSize)
	}
	b, off := r.since(0)
	if off != total-ptyRingSize || len(b) != ptyRingSize || !bytes.HasSuffix(b, []byte("xtail")) {
		t.Errorf("since(0) after overflow = %d bytes at %d; want the last %d at %d", len(b), off, ptyRingSize, total-ptyRingSize)
	}
	// What since returns is a copy: later writes do not change it.
	b, _ = r.since(total - 4)
	r.write([]byte("more"))
	if string(b) != "tail" {
		t.Errorf("a replay changed under a later write: %q", b)
	}
}

func TestPTYModeString(t *testing.T) {
	t.Parallel()
	for m, want := range map[PTYMode]string{ModePTY: "pty", ModePipe: "pipe", 0: ""} {
		if got := m.String(); got != want {
			t.Errorf("PTYMode(%d).String() = %q, want %q", int(m), got, want)
		}
	}
}

// newPTY returns a session of command in a fresh table that is closed
// when the test ends.
func newPTY(t *testing.T, command string) (*PTYs, *PTY) {
	t.Helper()
	ptys := NewPTYs()
	t.Cleanup(ptys.Close)
	return ptys, ptys.Create(t.TempDir(), command, []string{"PATH=/usr/bin:/bin"})
}

// attach attaches a new viewer that is closed when the test ends.
func attach(t *testing.T, p *PTY, mode PTYMode, since int64) (*Viewer, Attachment) {
	t.Helper()
	v := NewViewer()
	t.Cleanup(v.Close)
	a, err := p.Attach(v, mode, since)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	return v, a
}

// drain reads a viewer's events until the exit and returns the output
// per stream and the exit code.
func drain(t *testing.T, v *Viewer) (map[Stream]string, int) {
	t.Helper()
	out := map[Stream]string{}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-v.Events():
			if ev.Exited {
				return out, ev.ExitCode
			}
			out[ev.Stream] += string(ev.Data)
		case <-deadline:
			t.Fatalf("no exit; output so far %q", out)
		}
	}
}

// readUntil reads a viewer's output until it contains want.
func readUntil(t *testing.T, v *Viewer, want string) string {
	t.Helper()
	var out strings.Builder
	deadline := time.After(10 * time.Second)
	for !strings.Contains(out.String(), want) {
		select {
		case ev := <-v.Events():
			if ev.Exited {
				t.Fatalf("exit %d before %q; output %q", ev.ExitCode, want, out.String())
			}
			out.Write(ev.Data)
		case <-deadline:
			t.Fatalf("no %q in %q", want, out.String())
		}
	}
	return out.String()
}

func TestPTYPipeModeKeepsStreamsApartAndReplays(t *testing.T) {
	t.Parallel()
	_, p := newPTY(t, "echo out; echo err >&2; exit 3")
	if running, off := p.Status(); running || off != 0 {
		t.Errorf("Status before the first attach = %v, %d; want not running, 0", running, off)
	}
	v, a := attach(t, p, ModePipe, -1)
	if a.Mode != ModePipe || a.Exited || a.Replay != nil {
		t.Errorf("first attachment = %+v", a)
	}
	out, code := drain(t, v)
	if out[Stdout] != "out\n" || out[Stderr] != "err\n" || code != 3 {
		t.Errorf("pipe mode = %q, exit %d; want out and err apart, exit 3", out, code)
	}
	if running, off := p.Status(); running || off != 8 {
		t.Errorf("Status after the exit = %v, %d; want not running, 8", running, off)
	}
	// A viewer attaching later replays the output and learns the exit; a
	// mode asked for then does not change the session's.
	_, a = attach(t, p, ModePTY, 4)
	if a.Mode != ModePipe || !a.Exited || a.ExitCode != 3 || a.ReplayOffset != 4 || len(a.Replay) != 4 {
		t.Errorf("attachment after the exit = %+v", a)
	}
	if err := p.Signal("SIGTERM"); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("Signal after the exit = %v", err)
	}
}

func TestPTYPipeStdinEOF(t *testing.T) {
	t.Parallel()
	_, p := newPTY(t, "wc -c")
	if err := p.WriteStdin([]byte("early")); err == nil {
		t.Errorf("WriteStdin before the start succeeded")
	}
	v, _ := attach(t, p, ModePipe, -1)
	if err := p.WriteStdin([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	if err := p.CloseStdin(); err == nil {
		t.Errorf("a second CloseStdin in pipe mode succeeded")
	}
	if out, code := drain(t, v); strings.TrimSpace(out[Stdout]) != "5" || code != 0 {
		t.Errorf("wc -c after EOF = %q, exit %d", out, code)
	}
}

func TestPTYSignals(t *testing.T) {
	t.Parallel()
	for _, mode := range []PTYMode{ModePipe, ModePTY} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			_, p := newPTY(t, "echo ready; sleep 30")
			if err := p.Signal("SIGTERM"); err == nil {
				t.Errorf("Signal before the start succeeded")
			}
			v, _ := attach(t, p, mode, -1)
			readUntil(t, v, "ready")
			if err := p.Signal("SIGSTOP"); err == nil {
				t.Errorf("Signal(SIGSTOP) succeeded; only five signals are allowed")
			}
			if err := p.Signal("SIGTERM"); err != nil {
				t.Fatal(err)
			}
			if _, code := drain(t, v); code != 143 {
				t.Errorf("exit after SIGTERM = %d, want 143", code)
			}
		})
	}
}

func TestPTYTerminalResize(t *testing.T) {
	t.Parallel()
	_, p := newPTY(t, "stty size; read line; stty size")
	v, a := attach(t, p, ModePTY, -1)
	if a.Mode != ModePTY {
		t.Errorf("mode = %v", a.Mode)
	}
	readUntil(t, v, "24 80")
	for _, bad := range [][2]int{{0, 24}, {80, 0}, {10001, 24}} {
		if err := p.Resize(bad[0], bad[1]); err == nil {
			t.Errorf("Resize(%d, %d) succeeded", bad[0], bad[1])
		}
	}
	if err := p.Resize(120, 40); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteStdin([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, v, "40 120")

	_, pipes := newPTY(t, "sleep 30")
	attach(t, pipes, ModePipe, -1)
	if err := pipes.Resize(120, 40); err == nil || !strings.Contains(err.Error(), "PTY mode") {
		t.Errorf("Resize in pipe mode = %v", err)
	}
}

// One viewer at a time: attaching another ends the first with
// EndTakenOver, and deleting the session ends the last with EndDeleted.
func TestPTYViewersEnd(t *testing.T) {
	t.Parallel()
	ptys, p := newPTY(t, "echo first; sleep 30")
	v1, _ := attach(t, p, ModePipe, -1)
	readUntil(t, v1, "first")
	if !p.HasViewer() {
		t.Errorf("HasViewer = false with a viewer attached")
	}
	v2, a := attach(t, p, ModePipe, 0)
	if string(a.Replay) != "first\n" {
		t.Errorf("takeover replay = %q", a.Replay)
	}
	select {
	case <-v1.Ended():
		if r := v1.Reason(); r != EndTakenOver {
			t.Errorf("replaced viewer's reason = %v, want EndTakenOver", r)
		}
	default:
		t.Errorf("the replaced viewer was not ended")
	}
	p.Detach(v1) // no longer the viewer: changes nothing
	if !p.HasViewer() {
		t.Errorf("detaching a replaced viewer detached the current one")
	}
	if got, ok := ptys.Get(p.ID); !ok || got != p {
		t.Errorf("Get(%s) = %v, %v", p.ID, got, ok)
	}
	if !ptys.Delete(p.ID) {
		t.Fatalf("Delete found no session")
	}
	<-v2.Ended()
	if r := v2.Reason(); r != EndDeleted {
		t.Errorf("viewer of a deleted session's reason = %v, want EndDeleted", r)
	}
	if running, _ := p.Status(); running {
		t.Errorf("the shell of a deleted session still runs")
	}
	if _, ok := ptys.Get(p.ID); ok || ptys.Delete(p.ID) {
		t.Errorf("a deleted session is still there")
	}
}

// A viewer that stops reading holds the output back until it is closed;
// closing it lets the shell finish.
func TestPTYClosedViewerReleasesOutput(t *testing.T) {
	t.Parallel()
	_, p := newPTY(t, "head -c 4000000 /dev/zero")
	v := NewViewer()
	if _, err := p.Attach(v, ModePipe, -1); err != nil {
		t.Fatal(err)
	}
	v.Close()
	testutil.WaitFor(t, 10*time.Second, "the shell to finish its output", func() bool {
		running, off := p.Status()
		return !running && off == 4000000
	})
}

func TestPTYStartFailure(t *testing.T) {
	t.Parallel()
	ptys := NewPTYs()
	t.Cleanup(ptys.Close)
	p := ptys.Create("/nonexistent-dir", "", nil)
	v := NewViewer()
	defer v.Close()
	if _, err := p.Attach(v, ModePipe, -1); err == nil {
		t.Fatal("Attach in a missing directory succeeded")
	}
	if p.HasViewer() {
		t.Errorf("a viewer stays attached to a session that did not start")
	}
	if !ptys.Delete(p.ID) {
		t.Errorf("Delete of a session that never started = false")
	}
}
