// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Where a sandbox's parts live. The bundle (runtime config, metadata,
// status, exit code, the enforcer's files) and the runc state are small
// files written on every create: they live on a tmpfs under Root/run,
// where what a sandbox can make grow is capped by its writer (the
// enforcer's log). The root filesystem's writable layer and the console
// log (capped by PID 1) live on disk under Root/sandboxes. No mount of
// a sandbox's is made in the server's mount namespace (but the file
// system of a disk limit): see create.
func runDir(root string) string              { return filepath.Join(root, "run") }
func (d *Driver) bundleDir(id string) string { return filepath.Join(runDir(d.cfg.Root), "bundles", id) }
func (d *Driver) diskDir(id string) string   { return filepath.Join(d.cfg.Root, "sandboxes", id) }

// netnsPath is where sandboxes made before namespaces were held by
// descriptors have their namespace's pin.
func (d *Driver) netnsPath(id string) string { return filepath.Join(runDir(d.cfg.Root), "netns", id) }

// egressDir holds a sandbox's egress enforcer's files.
func egressDir(bundle string) string { return filepath.Join(bundle, "egress") }

func cgroupsPath(id string) string { return "/corral/" + id }

// bundleMeta is written first into a bundle, so List finds even a sandbox
// whose create was interrupted.
type bundleMeta struct {
	ID      string            `json:"id"`
	Tenant  string            `json:"tenant"`
	Labels  map[string]string `json:"labels"`
	Created time.Time         `json:"created"`
	Layers  []string          `json:"layers"`
	// Base is what the root file system lies on (nil in bundles made
	// before snapshots).
	Base *rootBase `json:"base,omitempty"`
	// Volumes are the named volumes the sandbox mounts; DeleteVolumes
	// those it removes when destroyed, if it made them.
	Volumes       []string `json:"volumes,omitempty"`
	DeleteVolumes []string `json:"deleteVolumes,omitempty"`
	// IDRange is the sandbox's host ID range (slot + 1; 0: no user
	// namespace).
	IDRange int `json:"idRange,omitempty"`
	// Isolation is the sandbox's tier when it is not runc (runsc).
	Isolation string `json:"isolation,omitempty"`
}

// rangesInUse reads the host ID ranges of the sandboxes on disk.
func (d *Driver) rangesInUse() (map[int]string, error) {
	entries, err := os.ReadDir(filepath.Join(runDir(d.cfg.Root), "bundles"))
	if err != nil {
		return nil, err
	}
	used := map[int]string{}
	for _, e := range entries {
		m, err := readMeta(filepath.Join(runDir(d.cfg.Root), "bundles", e.Name()))
		switch {
		case err == nil && m.IDRange > 0:
			used[m.IDRange-1] = e.Name()
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			// Metadata is written before the range is used: a bundle
			// whose metadata cannot be read never ran in one.
			d.log.Warn("a bundle's metadata cannot be read", "bundle", e.Name(), "err", err)
		}
	}
	return used, nil
}

func readMeta(bundle string) (*bundleMeta, error) {
	b, err := os.ReadFile(filepath.Join(bundle, "meta.json"))
	if err != nil {
		return nil, err
	}
	var m bundleMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// LayersInUse returns the layers of every sandbox on disk, for image GC.
func (d *Driver) LayersInUse() map[string]bool {
	return LayersInUse(d.cfg.Root)
}

// LayersInUse reads the layers of every sandbox bundle and every
// snapshot under root.
func LayersInUse(root string) map[string]bool {
	out := map[string]bool{}
	snaps := filepath.Join(root, "snapshots")
	snapEntries, _ := os.ReadDir(snaps)
	for _, e := range snapEntries {
		// A removed snapshot's image layers are kept by the bundles of
		// the sandboxes that still stack it.
		if sm, err := readSnapshotIn(snaps, e.Name()); err == nil {
			for _, l := range sm.Base.Layers {
				out[l] = true
			}
		}
	}
	bundles := filepath.Join(runDir(root), "bundles")
	entries, _ := os.ReadDir(bundles)
	for _, e := range entries {
		if m, err := readMeta(filepath.Join(bundles, e.Name())); err == nil {
			for _, l := range m.Layers {
				out[l] = true
			}
		}
	}
	return out
}
