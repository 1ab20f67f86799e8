// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package fakedriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/sandbox"
)

// A named volume of the fake is a file, Dir/volumes/TENANT-KEY/NAME.json;
// host volumes mount nothing.

type volumeObject struct {
	Name      string    `json:"name"`
	Tenant    string    `json:"tenant"`
	CreatedAt time.Time `json:"createdAt"`
	CreatedBy string    `json:"createdBy"`
	SizeBytes int64     `json:"sizeBytes,omitempty"`
}

func (d *Driver) volumePath(tenant, name string) string {
	return filepath.Join(d.cfg.Dir, "volumes", sandbox.TenantKey(tenant), name+".json")
}

// makeVolumesLocked makes spec's named volumes that may be made; one that
// must exist and does not is an error.
func (d *Driver) makeVolumesLocked(spec driver.Spec) error {
	for _, v := range spec.Volumes {
		if v.Kind != sandbox.VolumeNamed {
			continue
		}
		p := d.volumePath(spec.Tenant, v.Claim)
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if !v.Create {
			return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumePVCNotFound, "volume %q: named volume %s does not exist", v.Name, v.Claim)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := writeJSON(p, volumeObject{Name: v.Claim, Tenant: spec.Tenant, CreatedAt: time.Now().UTC(), CreatedBy: spec.ID, SizeBytes: v.SizeBytes}); err != nil {
			return err
		}
	}
	return nil
}

// usersLocked maps tenant's named volumes to the sandboxes that mount
// them.
func (d *Driver) usersLocked(tenant string) map[string][]string {
	out := map[string][]string{}
	entries, _ := os.ReadDir(filepath.Join(d.cfg.Dir, "objects"))
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		o, err := d.load(id)
		if err != nil || o.Tenant != tenant {
			continue
		}
		for _, c := range o.Volumes {
			out[c] = append(out[c], o.ID)
		}
	}
	return out
}

// ListVolumes implements driver.Volumer.
func (d *Driver) ListVolumes(_ context.Context, tenant string) ([]driver.VolumeInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	entries, err := os.ReadDir(filepath.Join(d.cfg.Dir, "volumes", sandbox.TenantKey(tenant)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	users := d.usersLocked(tenant)
	var out []driver.VolumeInfo
	for _, e := range entries {
		var v volumeObject
		b, err := os.ReadFile(filepath.Join(d.cfg.Dir, "volumes", sandbox.TenantKey(tenant), e.Name()))
		if err != nil || json.Unmarshal(b, &v) != nil {
			continue
		}
		out = append(out, driver.VolumeInfo{Name: v.Name, CreatedAt: v.CreatedAt, InUseBy: users[v.Name], SizeBytes: v.SizeBytes})
	}
	return out, nil
}

// RemoveVolume implements driver.Volumer.
func (d *Driver) RemoveVolume(_ context.Context, tenant, name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.removeVolumeLocked(tenant, name, "")
}

func (d *Driver) removeVolumeLocked(tenant, name, onlyMadeBy string) error {
	if validID(name) != nil {
		return fmt.Errorf("volume %s: %w", name, errdefs.ErrNotFound)
	}
	p := d.volumePath(tenant, name)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("volume %s: %w", name, errdefs.ErrNotFound)
	}
	if err != nil {
		return err
	}
	var v volumeObject
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if onlyMadeBy != "" && v.CreatedBy != onlyMadeBy {
		return nil
	}
	if users := slices.DeleteFunc(d.usersLocked(tenant)[name], func(id string) bool { return id == onlyMadeBy }); len(users) > 0 {
		return fmt.Errorf("volume %s is mounted by %v: %w", name, users, errdefs.ErrFailedPrecondition)
	}
	return os.Remove(p)
}
