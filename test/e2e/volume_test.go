// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	"github.com/moby/moby/client/pkg/versions"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sdk"
)

// volumeScenario checks a runtime's volumes through the server: host
// volumes read-write and read-only under the allowed prefix, every way
// out of it refused with the rule named, and named volumes
// (namedVolumeScenario).
func volumeScenario(t *testing.T, s *server, image, allowed string) {
	t.Helper()
	c := s.client(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	shared := filepath.Join(allowed, "shared")
	must(os.MkdirAll(filepath.Join(shared, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(shared, "from-host"), []byte("host\n"), 0o644))
	outside := t.TempDir()
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("secret\n"), 0o600))
	must(os.Symlink(outside, filepath.Join(allowed, "link-out")))
	must(os.Symlink(outside, filepath.Join(shared, "inner-link")))

	create := func(c *sdk.Client, vols ...api.Volume) (*api.CreateSandboxResponse, error) {
		req := ociCreate(image)
		req.Volumes = vols
		return c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	}
	host := func(name, path, target string, ro bool, sub string) api.Volume {
		return api.Volume{Name: name, Host: &api.HostVolume{Path: path}, MountPath: target, ReadOnly: ro, SubPath: sub}
	}

	sb, err := create(c, host("rw", shared, "/mnt/rw", false, ""), host("ro", shared, "/mnt/ro", true, ""),
		host("sub", shared, "/mnt/sub", false, "sub"))
	if err != nil {
		t.Fatalf("create with volumes: %v", err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(ctx(t), sb.ID) })
	x := sandboxExecd(t, c, sb.ID)
	out, errOut, code := x.run("cat /mnt/rw/from-host; echo sandbox > /mnt/rw/from-sandbox; echo nested > /mnt/sub/file; " +
		"echo no > /mnt/ro/x 2>/dev/null && echo ro-written; cat /mnt/rw/inner-link/secret 2>/dev/null || echo no-secret")
	if code != 0 || out != "host\nno-secret\n" {
		t.Errorf("in the sandbox: %q %q (exit %d)", out, errOut, code)
	}
	// A link inside an allowed directory leads to the sandbox's own
	// root, never the host's: the mount is the directory, not a path.
	if b, _ := os.ReadFile(filepath.Join(shared, "from-sandbox")); string(b) != "sandbox\n" {
		t.Errorf("the host sees %q of the sandbox's write", b)
	}
	if b, _ := os.ReadFile(filepath.Join(shared, "sub", "file")); string(b) != "nested\n" {
		t.Errorf("the sub-path write: %q", b)
	}

	for _, tc := range []struct {
		name string
		vol  api.Volume
		code string
	}{
		{"outside the prefix", host("v", outside, "/mnt/v", false, ""), api.CodeVolumeHostPathForbidden},
		{"a link out", host("v", filepath.Join(allowed, "link-out"), "/mnt/v", false, ""), api.CodeVolumeHostPathForbidden},
		{"a sub-path through a link out", host("v", shared, "/mnt/v", false, "inner-link"), api.CodeVolumeHostPathForbidden},
		{"dot-dot in the sub-path", host("v", shared, "/mnt/v", false, "../.."), api.CodeVolumeInvalidSubPath},
		{"dot-dot in the host path", host("v", shared+"/../../etc", "/mnt/v", false, ""), api.CodeVolumeInvalidHostPath},
		{"missing", host("v", filepath.Join(allowed, "nope"), "/mnt/v", false, ""), api.CodeVolumeHostPathNotFound},
		{"a relative mount path", host("v", shared, "mnt", false, ""), api.CodeVolumeInvalidMountPath},
		{"over /proc", host("v", shared, "/proc", false, ""), api.CodeVolumeInvalidMountPath},
		{"over corral", host("v", shared, "/.corral", false, ""), api.CodeVolumeInvalidMountPath},
	} {
		_, err := create(c, tc.vol)
		var ae *sdk.APIError
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != tc.code {
			t.Errorf("%s: create = %v, want 400 %s", tc.name, err, tc.code)
		}
	}
	must(c.DeleteSandbox(ctx(t), sb.ID))
	namedVolumeScenario(t, s, image)
}

// namedVolumeScenario checks named volumes through the server: shared by
// one tenant's sandboxes and invisible to another tenant's, listed,
// refused while mounted, deleted, gone with their sandbox when asked;
// what is not a named volume of a runtime's is refused with the rule.
func namedVolumeScenario(t *testing.T, s *server, image string) {
	t.Helper()
	c := s.client(t)
	other := tenantClient(t, s, "volumes-other")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	create := func(c *sdk.Client, vols ...api.Volume) (*api.CreateSandboxResponse, error) {
		req := ociCreate(image)
		// A quarter of a core: the kubernetes tier's node has two, and
		// three of these run at once.
		req.ResourceLimits["cpu"] = "250m"
		req.Volumes = vols
		return c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	}
	named := func(name, claim, target string) api.Volume {
		return api.Volume{Name: name, PVC: &api.PVCVolume{ClaimName: claim}, MountPath: target}
	}
	for _, tc := range []struct {
		name string
		vol  api.Volume
		code string
	}{
		{"a bad claim", named("v", "Bad_Name", "/mnt/v"), api.CodeVolumeInvalidPVCName},
		{"no backend", api.Volume{Name: "v", MountPath: "/mnt/v"}, api.CodeVolumeInvalidBackend},
		{"a missing named volume", api.Volume{Name: "v", PVC: &api.PVCVolume{ClaimName: "nobody", CreateIfNotExists: new(bool)}, MountPath: "/mnt/v"}, api.CodeVolumePVCNotFound},
		{"dot-dot in the sub-path", api.Volume{Name: "v", PVC: &api.PVCVolume{ClaimName: "x"}, MountPath: "/mnt/v", SubPath: "../x"}, api.CodeVolumeInvalidSubPath},
		{"over /dev", named("v", "x", "/dev/shm"), api.CodeVolumeInvalidMountPath},
		{"an unknown access mode", api.Volume{Name: "v", PVC: &api.PVCVolume{ClaimName: "x", AccessModes: []string{"ReadWriteSometimes"}}, MountPath: "/mnt/v"}, api.CodeInvalidParameter},
	} {
		_, err := create(c, tc.vol)
		var ae *sdk.APIError
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != tc.code {
			t.Errorf("%s: create = %v, want 400 %s", tc.name, err, tc.code)
		}
	}
	if _, err := create(c, api.Volume{Name: "v", OSSFS: &api.OSSFS{Bucket: "b"}, MountPath: "/mnt/v"}); !errors.Is(err, sdk.ErrNotImplemented) {
		t.Errorf("ossfs = %v, want 501", err)
	}
	if vols, _ := c.ListVolumes(ctx(t)); len(vols) != 0 {
		t.Errorf("refused creates left volumes %+v", vols)
	}

	sb, err := create(c, named("data", "team-data", "/data"))
	if err != nil {
		t.Fatalf("create with a named volume: %v", err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(ctx(t), sb.ID) })
	if out, errOut, code := sandboxExecd(t, c, sb.ID).run("echo kept > /data/kept && cat /data/kept"); code != 0 || out != "kept\n" {
		t.Errorf("write to the named volume: %q %q (exit %d)", out, errOut, code)
	}
	// The tenant's second sandbox shares the named volume; another
	// tenant's volume of the same name is another volume.
	sb2, err := create(c, api.Volume{Name: "d", PVC: &api.PVCVolume{ClaimName: "team-data"}, MountPath: "/d", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if out, _, _ := sandboxExecd(t, c, sb2.ID).run("cat /d/kept; touch /d/x 2>/dev/null || echo ro"); out != "kept\nro\n" {
		t.Errorf("the tenant's second sandbox sees %q", out)
	}
	sb3, err := create(other, named("d", "team-data", "/d"))
	if err != nil {
		t.Fatal(err)
	}
	if out, _, _ := sandboxExecd(t, other, sb3.ID).run("ls -A /d | wc -l"); strings.TrimSpace(out) != "0" {
		t.Errorf("another tenant's volume of the same name holds %q", out)
	}
	vols, err := c.ListVolumes(ctx(t))
	if err != nil || len(vols) != 1 || vols[0].Name != "team-data" || !slices.Contains(vols[0].InUseBy, sb.ID) || !slices.Contains(vols[0].InUseBy, sb2.ID) {
		t.Errorf("ListVolumes = %+v, %v", vols, err)
	}
	if err := c.DeleteVolume(ctx(t), "team-data"); !errors.Is(err, sdk.ErrFailedPrecondition) {
		t.Errorf("delete a mounted volume = %v, want 409", err)
	}
	for _, id := range []string{sb.ID, sb2.ID} {
		must(c.DeleteSandbox(ctx(t), id))
	}
	must(c.DeleteVolume(ctx(t), "team-data"))
	if err := c.DeleteVolume(ctx(t), "team-data"); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("delete twice = %v, want 404", err)
	}
	// The other tenant's is still there, and goes with its sandbox when
	// asked to.
	if vols, _ := other.ListVolumes(ctx(t)); len(vols) != 1 {
		t.Errorf("the other tenant's volumes: %+v", vols)
	}
	must(other.DeleteSandbox(ctx(t), sb3.ID))
	must(other.DeleteVolume(ctx(t), "team-data"))
	tmp, err := create(c, api.Volume{Name: "t", PVC: &api.PVCVolume{ClaimName: "scratch", DeleteOnSandboxTermination: true}, MountPath: "/t"})
	if err != nil {
		t.Fatal(err)
	}
	must(c.DeleteSandbox(ctx(t), tmp.ID))
	if vols, _ := c.ListVolumes(ctx(t)); len(vols) != 0 {
		t.Errorf("a volume made with deleteOnSandboxTermination outlived its sandbox: %+v", vols)
	}
}

// tenantClient is a client with a new key of another tenant.
func tenantClient(t *testing.T, s *server, tenant string) *sdk.Client {
	t.Helper()
	k, err := s.client(t).CreateAPIKey(ctx(t), api.CreateAPIKeyRequest{Tenant: tenant, Name: tenant})
	if err != nil {
		t.Fatal(err)
	}
	c, err := sdk.New(sdk.WithBaseURL(s.url), sdk.WithAPIKey(k.Key))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOCIVolumes: volumes on the native runtime.
func TestOCIVolumes(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	allowed := t.TempDir()
	dir := t.TempDir()
	s := startServer(t, dir, "--runtime", "oci", "--allowed-host-paths", allowed)
	volumeScenario(t, s, "host", allowed)
	// pvc.storage: a named volume of its own size on the native runtime.
	c := s.client(t)
	req := ociCreate("host")
	size := "8Mi"
	req.Volumes = []api.Volume{{Name: "s", PVC: &api.PVCVolume{ClaimName: "sized", Storage: &size}, MountPath: "/sized"}}
	sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, _, _ := sandboxExecd(t, c, sb.ID).run("head -c 16777216 /dev/zero > /sized/big 2>/dev/null || echo full; df -k /sized | tail -n 1 | awk '{print $2}'")
	f := strings.Fields(out)
	if len(f) != 2 || f[0] != "full" || atoi(f[1]) > 8192 || atoi(f[1]) < 4096 {
		t.Errorf("a volume of 8Mi: %q, want a write of 16 MiB refused and a file system of about 8 MiB", out)
	}
	if err := c.DeleteSandbox(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteVolume(ctx(t), "sized"); err != nil {
		t.Fatal(err)
	}
	s.stop(t)
	ociLeaks(dir)(t, nil)
}

// TestDockerVolumes: volumes on the docker runtime; at the end no volume
// of these tenants is left on the engine.
func TestDockerVolumes(t *testing.T) {
	cli := requireDocker(t)
	t.Parallel()
	ref := registryImage(t, cli)
	allowed := t.TempDir()
	s := startServer(t, t.TempDir(), "--runtime", "docker", "--allowed-host-paths", allowed)
	volumeScenario(t, s, ref, allowed)
	// A named volume's sub-path is the engine's to resolve, from API 1.45.
	c := s.client(t)
	req := ociCreate(ref)
	req.Volumes = []api.Volume{{Name: "d", PVC: &api.PVCVolume{ClaimName: "subbed", DeleteOnSandboxTermination: true}, MountPath: "/d", SubPath: "part"}}
	sb, err := c.CreateSandbox(ctx(t), req, sdk.CreateOptions{})
	var ae *sdk.APIError
	sv, verr := cli.ServerVersion(ctx(t), client.ServerVersionOptions{})
	if verr != nil {
		t.Fatal(verr)
	}
	if v := sv.APIVersion; versions.LessThan(v, "1.45") {
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != api.CodeVolumeInvalidSubPath || !strings.Contains(ae.Message, v) {
			t.Errorf("a named volume's subPath on engine API %s = %v, want 400 naming the version", v, err)
		}
		if vols, _ := c.ListVolumes(ctx(t)); len(vols) != 0 {
			t.Errorf("the refused create left volumes %+v", vols)
		}
	} else if err != nil {
		t.Errorf("a named volume's subPath on engine API %s = %v", v, err)
	} else {
		_ = c.DeleteSandbox(ctx(t), sb.ID)
	}
	res, err := cli.VolumeList(context.Background(), client.VolumeListOptions{Filters: client.Filters{}.Add("label", "corral.dev/volume")})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Items {
		if v.Labels["corral.dev/tenant"] == "volumes-other" {
			t.Errorf("leak: volume %s", v.Name)
		}
	}
	if m, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(m), allowed) {
		t.Errorf("leak: a staging mount of %s", allowed)
	}
}
