// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/insandbox"
)

// VolumeKind is a volume's backend.
type VolumeKind uint8

// The backends corral mounts.
const (
	// VolumeHost is a host directory under a prefix the operator allows.
	VolumeHost VolumeKind = iota + 1
	// VolumeNamed is one of the tenant's named volumes (the contract's
	// "pvc"), made on first use.
	VolumeNamed
)

// MaxVolumes is the most volumes one sandbox mounts.
const MaxVolumes = 16

// Volume is a checked storage mount of a sandbox.
type Volume struct {
	Name string
	Kind VolumeKind
	// HostPath is a host volume's directory as requested; the lifecycle
	// resolves it (Resolved) before a runtime sees it.
	HostPath string
	// Resolved is HostPath with SubPath, every link resolved: the
	// directory the runtime mounts.
	Resolved string
	// Claim is a named volume's name; Create makes it when missing;
	// DeleteWithSandbox removes it with the sandbox that made it.
	Claim             string
	Create            bool
	DeleteWithSandbox bool
	// SizeBytes bounds a named volume the create makes (pvc.storage);
	// 0: no bound of its own (on kubernetes: the server's default size).
	SizeBytes int64
	// StorageClass and AccessModes are the claim's on kubernetes, for a
	// named volume the create makes; other runtimes ignore them. Empty:
	// the server's default class, and ReadWriteOnce.
	StorageClass string
	AccessModes  []string
	// Target is where it is mounted in the sandbox; SubPath a directory
	// of it mounted instead of its root (relative, no "..").
	Target   string
	SubPath  string
	ReadOnly bool
}

// dnsLabel is a volume's and a named volume's name. It and dnsSubdomain
// are compiled on first use (a sandbox's PID 1 links this package).
var dnsLabel = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`) })

// dnsSubdomain is a storage class's name.
var dnsSubdomain = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
})

// AccessModes are the access modes a named volume's claim may ask for.
var AccessModes = []string{"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}

func volumeErr(code, format string, args ...any) error {
	return errdefs.Newf(errdefs.ErrInvalidArgument, code, format, args...)
}

// reservedTargets are where no volume may be mounted: what the kernel
// and the runtime put in every sandbox, and corral's own paths.
func reservedTargets() []string {
	return []string{"/proc", "/sys", "/dev", insandbox.BinaryDir, insandbox.GateFile, insandbox.SecretsDir, insandbox.ExecdStateDir, path.Dir(insandbox.VaultCA)}
}

// reservedFiles are files the runtime mounts that no volume may replace.
func reservedFiles() []string {
	return []string{"/etc/hosts", "/etc/hostname", "/etc/resolv.conf", insandbox.ExitFile, insandbox.ExecdEnvs, insandbox.CABundle}
}

// ParseVolumes checks a create's volumes: names, exactly one backend,
// mount paths, sub-paths. Host paths are only checked for form here;
// the lifecycle resolves them against the operator's prefixes.
func ParseVolumes(in []api.Volume) ([]Volume, error) {
	if len(in) > MaxVolumes {
		return nil, volumeErr(api.CodeInvalidParameter, "%d volumes: at most %d", len(in), MaxVolumes)
	}
	var out []Volume
	names, targets := map[string]bool{}, map[string]bool{}
	for i, v := range in {
		if len(v.Name) > 63 || !dnsLabel().MatchString(v.Name) {
			return nil, volumeErr(api.CodeVolumeInvalidName, "volumes[%d].name %q: a DNS label (lowercase letters, digits and '-', at most 63)", i, v.Name)
		}
		if names[v.Name] {
			return nil, volumeErr(api.CodeVolumeDuplicateName, "volume %q is given twice", v.Name)
		}
		names[v.Name] = true
		vol := Volume{Name: v.Name, ReadOnly: v.ReadOnly}
		backends := 0
		for _, set := range []bool{v.Host != nil, v.PVC != nil, v.OSSFS != nil} {
			if set {
				backends++
			}
		}
		if backends != 1 {
			return nil, volumeErr(api.CodeVolumeInvalidBackend, "volume %q: give exactly one of host, pvc and ossfs", v.Name)
		}
		var err error
		if vol.Target, err = mountTarget(v.Name, v.MountPath); err != nil {
			return nil, err
		}
		if targets[vol.Target] {
			return nil, volumeErr(api.CodeVolumeInvalidMountPath, "volume %q: another volume is mounted at %s", v.Name, vol.Target)
		}
		targets[vol.Target] = true
		if err := notNested(out, v.Name, vol.Target); err != nil {
			return nil, err
		}
		if vol.SubPath, err = subPath(v.Name, v.SubPath); err != nil {
			return nil, err
		}
		switch {
		case v.OSSFS != nil:
			return nil, errdefs.Newf(errdefs.ErrNotImplemented, api.CodeVolumeUnsupported,
				"volume %q: ossfs volumes are not served by corral; use host or pvc", v.Name)
		case v.Host != nil:
			p := v.Host.Path
			if !path.IsAbs(p) || path.Clean(p) != p || strings.ContainsRune(p, 0) || p == "/" {
				return nil, volumeErr(api.CodeVolumeInvalidHostPath, "volume %q: host.path %q must be an absolute, clean path other than /", v.Name, p)
			}
			vol.Kind, vol.HostPath = VolumeHost, p
		default:
			if len(v.PVC.ClaimName) > 63 || !dnsLabel().MatchString(v.PVC.ClaimName) {
				return nil, volumeErr(api.CodeVolumeInvalidPVCName, "volume %q: pvc.claimName %q: a DNS label (at most 63)", v.Name, v.PVC.ClaimName)
			}
			if v.PVC.Storage != nil {
				n, err := ParseBytes(*v.PVC.Storage)
				if err != nil || n < 4<<20 {
					return nil, volumeErr(api.CodeInvalidParameter, "volume %q: pvc.storage %q is not a size of at least 4Mi, such as 1Gi", v.Name, *v.PVC.Storage)
				}
				vol.SizeBytes = n
			}
			if c := v.PVC.StorageClass; c != nil && *c != "" {
				if len(*c) > 253 || !dnsSubdomain().MatchString(*c) {
					return nil, volumeErr(api.CodeInvalidParameter, "volume %q: pvc.storageClass %q is not a storage class name", v.Name, *c)
				}
				vol.StorageClass = *c
			}
			for _, m := range v.PVC.AccessModes {
				if !slices.Contains(AccessModes, m) || slices.Contains(vol.AccessModes, m) {
					return nil, volumeErr(api.CodeInvalidParameter, "volume %q: pvc.accessModes: %q is not one of %s, or is given twice",
						v.Name, m, strings.Join(AccessModes, ", "))
				}
				vol.AccessModes = append(vol.AccessModes, m)
			}
			vol.Kind, vol.Claim = VolumeNamed, v.PVC.ClaimName
			vol.Create = v.PVC.CreateIfNotExists == nil || *v.PVC.CreateIfNotExists
			vol.DeleteWithSandbox = v.PVC.DeleteOnSandboxTermination
		}
		out = append(out, vol)
	}
	return out, nil
}

// CheckMount checks where a volume is mounted, as ParseVolumes does:
// for what reaches a runtime by another way than a create (a Sandbox
// resource the kubernetes controller reads).
func CheckMount(name, target, sub string) error {
	if len(name) > 63 || !dnsLabel().MatchString(name) {
		return volumeErr(api.CodeVolumeInvalidName, "volume name %q: a DNS label (lowercase letters, digits and '-', at most 63)", name)
	}
	if _, err := mountTarget(name, target); err != nil {
		return err
	}
	_, err := subPath(name, sub)
	return err
}

// CheckNotNested refuses volumes of which one is mounted inside another
// (names and targets in the same order), as ParseVolumes does.
func CheckNotNested(names, targets []string) error {
	var seen []Volume
	for i, t := range targets {
		if err := notNested(seen, names[i], t); err != nil {
			return err
		}
		seen = append(seen, Volume{Name: names[i], Target: t})
	}
	return nil
}

// notNested refuses a volume mounted inside one of vols, or over one:
// the outer volume's files are the tenant's, written by its sandboxes at
// any time, so a link among them could carry the inner mount anywhere
// in the sandbox's root (its reserved paths included) after every check.
func notNested(vols []Volume, name, target string) error {
	for _, o := range vols {
		if strings.HasPrefix(target, o.Target+"/") || strings.HasPrefix(o.Target, target+"/") {
			return volumeErr(api.CodeVolumeInvalidMountPath, "volume %q: mountPath %s and volume %q's %s are one inside the other; mount volumes side by side", name, target, o.Name, o.Target)
		}
	}
	return nil
}

// mountTarget checks a mount path: absolute, clean, and none of the
// sandbox's own.
func mountTarget(name, p string) (string, error) {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" || strings.ContainsRune(p, 0) || len(p) > 4096 {
		return "", volumeErr(api.CodeVolumeInvalidMountPath, "volume %q: mountPath %q must be an absolute, clean path other than /", name, p)
	}
	for _, r := range reservedTargets() {
		if p == r || strings.HasPrefix(p, r+"/") || strings.HasPrefix(r, p+"/") {
			return "", volumeErr(api.CodeVolumeInvalidMountPath, "volume %q: mountPath %q would cover %s, which the sandbox needs", name, p, r)
		}
	}
	for _, f := range reservedFiles() {
		if p == f || strings.HasPrefix(f, p+"/") {
			return "", volumeErr(api.CodeVolumeInvalidMountPath, "volume %q: mountPath %q would cover %s, which the runtime provides", name, p, f)
		}
	}
	return p, nil
}

// subPath checks a sub-path: relative, without "..", "." or empty parts.
func subPath(name, p string) (string, error) {
	if p == "" {
		return "", nil
	}
	bad := path.IsAbs(p) || strings.ContainsRune(p, 0) || len(p) > 4096
	for _, part := range strings.Split(p, "/") {
		bad = bad || part == ".." || part == "." || part == ""
	}
	if bad {
		return "", volumeErr(api.CodeVolumeInvalidSubPath, "volume %q: subPath %q must be a relative path without '..', '.' or empty parts", name, p)
	}
	return p, nil
}

// TenantKey names a tenant in paths and backend names: a digest, so a
// tenant's name never becomes a path and two tenants never share one.
func TenantKey(tenant string) string {
	sum := sha256.Sum256([]byte("corral tenant " + tenant))
	return hex.EncodeToString(sum[:8])
}
