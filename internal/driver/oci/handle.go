// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	runc "github.com/containerd/go-runc"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/procfs"
)

// instance is what the driver knows of a running sandbox.
type instance struct {
	bundle    string
	pid       int
	startTime uint64
	// ns holds the sandbox's network namespace open; netns names it for
	// this process ("" while none is held: its PID 1 exited before this
	// instance saw it).
	ns    *os.File
	netns string
	// runsc: it runs under gVisor, and pid is its Sentry's.
	runsc bool
}

// hold keeps f as the sandbox's network namespace.
func (in *instance) hold(f *os.File) {
	in.ns, in.netns = f, fdPath(f)
}

// release closes the namespace the sandbox held.
func (in *instance) release() {
	if in != nil && in.ns != nil {
		in.ns.Close()
		in.ns, in.netns = nil, ""
	}
}

// handleState is the driver-private part of a handle.
type handleState struct {
	Bundle    string `json:"bundle"`
	Pid       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	// Netns is the namespace's pin of a sandbox made before namespaces
	// were held by descriptors; since then it is empty, and the
	// namespace is PID 1's.
	Netns string `json:"netns,omitempty"`
	// UserNS: the sandbox has a user namespace of its own.
	UserNS bool `json:"userns,omitempty"`
	// Runsc: the sandbox runs under gVisor; Pid is its Sentry's.
	Runsc bool `json:"runsc,omitempty"`
}

// state returns runc's view of a container; ErrNotFound if runc has none.
func (d *Driver) state(ctx context.Context, id string) (*runc.Container, error) {
	rt := d.rt(id)
	c, err := rt.State(ctx, id)
	if notExist(err) {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("runc state %s: %w", id, err)
	}
	if rt == d.runsc {
		runscStateExited(c)
	}
	return c, nil
}

// Recover implements driver.Driver.
func (d *Driver) Recover(ctx context.Context, h *driver.Handle) error {
	if h == nil || h.Driver != Name {
		return fmt.Errorf("recover: not an %s handle: %w", Name, errdefs.ErrInvalidArgument)
	}
	var hs handleState
	if err := json.Unmarshal(h.State, &hs); err != nil {
		return fmt.Errorf("recover %s: corrupt handle: %w", h.ID, errdefs.ErrInvalidArgument)
	}
	if _, err := d.state(ctx, h.ID); err != nil {
		return err
	}
	if _, err := os.Stat(hs.Bundle); err != nil {
		return fmt.Errorf("sandbox %s: bundle gone: %w", h.ID, errdefs.ErrNotFound)
	}
	if err := d.thawInterrupted(ctx, h.ID, hs.Bundle); err != nil {
		return err
	}
	sb := &instance{bundle: hs.Bundle, pid: hs.Pid, startTime: hs.StartTime, runsc: hs.Runsc}
	if ns, err := openNetns(hs); err == nil {
		sb.hold(ns)
		if err := d.net.Recover(ctx, h.ID, egressDir(hs.Bundle), sb.netns); err != nil {
			sb.release()
			return fmt.Errorf("sandbox %s: egress: %w", h.ID, err)
		}
	} else if err := d.net.Stop(ctx, h.ID, egressDir(hs.Bundle)); err != nil {
		// PID 1 exited while no server ran, and its namespace with it:
		// nothing is left to police.
		return fmt.Errorf("sandbox %s: egress: %w", h.ID, err)
	}
	d.track(h.ID, sb)
	if sb.netns != "" {
		if err := d.drains.start(h.ID, hs.Bundle, d.diskDir(h.ID)); err != nil {
			return fmt.Errorf("sandbox %s: console: %w", h.ID, err)
		}
	}
	return nil
}

// openNetns opens a recovered sandbox's network namespace: its pin if
// it has one, else its PID 1's.
func openNetns(hs handleState) (*os.File, error) {
	if hs.Netns != "" {
		if f, err := os.Open(hs.Netns); err == nil {
			return f, nil
		}
	}
	return netnsOf(hs.Pid, hs.StartTime)
}

// track records sb as what the driver knows of sandbox id, releasing
// what it knew before.
func (d *Driver) track(id string, sb *instance) {
	d.mu.Lock()
	old := d.live[id]
	d.live[id] = sb
	d.mu.Unlock()
	if old != sb {
		old.release()
	}
}

// adopt records sb for sandbox id unless the driver knows it by now (a
// create or a recovery that finished meanwhile), and returns what it
// knows.
func (d *Driver) adopt(id string, sb *instance) *instance {
	d.mu.Lock()
	old := d.live[id]
	if old == nil {
		d.live[id] = sb
	}
	d.mu.Unlock()
	if old != nil {
		sb.release()
		return old
	}
	return sb
}

// forget drops sandbox id and releases its namespace.
func (d *Driver) forget(id string) {
	d.mu.Lock()
	sb := d.live[id]
	delete(d.live, id)
	d.mu.Unlock()
	sb.release()
}

// running returns a sandbox this instance tracks whose PID 1 is alive,
// without asking runc (an exec of runc costs milliseconds).
func (d *Driver) running(id string) *instance {
	d.mu.Lock()
	sb := d.live[id]
	d.mu.Unlock()
	if sb != nil && procfs.Alive(sb.pid, sb.startTime) {
		return sb
	}
	return nil
}

// lookup returns what the driver knows of id, reading it from runc and
// the bundle if this instance did not create or recover it.
func (d *Driver) lookup(ctx context.Context, id string) (*instance, *runc.Container, error) {
	if err := validID(id); err != nil {
		return nil, nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	c, err := d.state(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	d.mu.Lock()
	sb := d.live[id]
	d.mu.Unlock()
	if sb == nil {
		// Not made nor recovered by this instance: adopted, with its
		// namespace if its PID 1 still runs.
		sb = &instance{bundle: d.bundleDir(id), pid: c.Pid, runsc: bundleRunsc(d.bundleDir(id))}
		if c.Pid > 0 {
			sb.startTime, _ = procfs.StartTime(c.Pid)
			if ns, err := netnsOf(c.Pid, sb.startTime); err == nil {
				sb.hold(ns)
				sb = d.adopt(id, sb)
				if err := d.drains.start(id, sb.bundle, d.diskDir(id)); err != nil {
					d.log.WarnContext(ctx, "drain the console", "sandbox_id", id, "err", err)
				}
			}
		}
	}
	return sb, c, nil
}
