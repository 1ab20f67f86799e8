// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/hostnet/netns"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/sandbox"
)

// state is the handle's driver-private part.
type state struct {
	ContainerID string `json:"containerId"`
	// Isolation is the tier the sandbox was made in (Spec.Isolation);
	// empty in handles made before tiers, which ran the default.
	Isolation string `json:"isolation,omitempty"`
}

// snapState is a snapshot reference's driver-private part.
type snapState struct {
	Image string `json:"image"`
}

// inspect returns the sandbox's container; ErrNotFound if there is none
// or it is not ours.
func (d *Driver) inspect(ctx context.Context, id string) (container.InspectResponse, error) {
	if validID(id) != nil {
		return container.InspectResponse{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	cctx, cancel := d.call(ctx)
	defer cancel()
	res, err := d.cli.ContainerInspect(cctx, containerName(id), client.ContainerInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return container.InspectResponse{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
		}
		return container.InspectResponse{}, d.engineErr("inspect "+id, err)
	}
	c := res.Container
	if c.Config == nil || c.Config.Labels[sandbox.LabelSandboxID] != id || c.State == nil {
		return container.InspectResponse{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return c, nil
}

// Recover implements driver.Driver.
func (d *Driver) Recover(ctx context.Context, h *driver.Handle) error {
	if h.Driver != Name {
		return fmt.Errorf("handle of driver %q: %w", h.Driver, errdefs.ErrInvalidArgument)
	}
	var st state
	if len(h.State) > 0 {
		if err := json.Unmarshal(h.State, &st); err != nil {
			return fmt.Errorf("handle state: %w", errdefs.ErrInvalidArgument)
		}
	}
	c, err := d.inspect(ctx, h.ID)
	if err != nil {
		return err
	}
	if st.ContainerID != "" && c.ID != st.ContainerID {
		return fmt.Errorf("sandbox %s: its container was replaced: %w", h.ID, errdefs.ErrNotFound)
	}
	if d.cfg.Remote {
		return d.recoverSidecar(ctx, h.ID, c)
	}
	if dir := d.egressDir(h.ID); dir != "" && c.State.Running {
		if _, err := os.Stat(dir); err == nil {
			ns, err := d.nsPath(h.ID, c)
			if err != nil {
				return err
			}
			if err := d.net.Recover(ctx, h.ID, dir, ns); err != nil {
				return fmt.Errorf("sandbox %s: egress: %w", h.ID, err)
			}
		}
	}
	return nil
}

func (d *Driver) dropNetns(id string) {
	d.mu.Lock()
	f := d.netns[id]
	delete(d.netns, id)
	d.mu.Unlock()
	if f != nil {
		f.Close()
	}
}

// nsPath returns a path to sandbox id's network namespace that stays
// right for as long as the driver tracks the sandbox: it names a
// descriptor held open, not a pid.
func (d *Driver) nsPath(id string, c container.InspectResponse) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f, ok := d.netns[id]; ok {
		return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())), nil
	}
	if c.State.Pid <= 0 {
		return "", fmt.Errorf("sandbox %s is not running: %w", id, errdefs.ErrFailedPrecondition)
	}
	f, err := os.Open("/proc/" + strconv.Itoa(c.State.Pid) + "/ns/net")
	if err != nil {
		return "", fmt.Errorf("sandbox %s: its network namespace: %w", id, err)
	}
	path := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	// The container's sysctl does this under runc; gVisor ignores it.
	if err := netns.ReservePorts(path, insandbox.ExecdPort); err != nil {
		f.Close()
		return "", fmt.Errorf("sandbox %s: %w", id, err)
	}
	d.netns[id] = f
	return path, nil
}
