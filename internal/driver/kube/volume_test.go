// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/kube/kubetest"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/testutil"
)

// TestNamedVolumesAreClaims: a named volume is a PersistentVolumeClaim of
// the namespace, made with the create's storage class, size and access
// modes (the test cluster's hostPath provisioner binds it); two sandboxes
// of a tenant share it, one read-only through a sub-path; a sub-path that
// is a link out of the volume is refused by the kubelet and leaves
// nothing; a claim made to go with its sandboxes stays while another
// mounts it and goes with the last, also when the controller deletes that
// one at its expiry; a claim no volume binds keeps the sandbox from
// starting with the scheduler's reason.
func TestNamedVolumesAreClaims(t *testing.T) {
	w := newWorld(t)
	d := w.driver(t)
	ctx := context.Background()
	tenant := "vol" + randID()
	spec := func(vols ...sandbox.Volume) driver.Spec {
		s := driver.Spec{ID: "vol" + randID(), Tenant: tenant, Image: driver.Image{URI: w.image},
			Entrypoint: []string{"sleep", "3600"}, ExecdToken: randID(), Volumes: vols}
		t.Cleanup(func() { _ = d.Destroy(context.Background(), s.ID) })
		return s
	}
	named := func(claim, target string) sandbox.Volume {
		return sandbox.Volume{Name: "v", Kind: sandbox.VolumeNamed, Claim: claim, Create: true, Target: target}
	}
	run := func(s driver.Spec, cmd string) (string, int) {
		t.Helper()
		ep, err := d.Endpoint(ctx, s.ID, insandbox.ExecdPort)
		if err != nil {
			t.Fatal(err)
		}
		return kubetest.Exec(t, ep.String(), s.ExecdToken, cmd)
	}
	claim := func(name string) (*corev1.PersistentVolumeClaim, error) {
		var pvc corev1.PersistentVolumeClaim
		err := w.c.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: claimName(tenant, name)}, &pvc)
		return &pvc, err
	}

	data := named("data", "/mnt/data")
	data.StorageClass, data.SizeBytes, data.AccessModes = "corral-test-hostpath", 64<<20, []string{"ReadWriteOnce"}
	a := spec(data)
	if _, err := d.Create(ctx, a); err != nil {
		t.Fatalf("create with a new named volume: %v", err)
	}
	pvc, err := claim("data")
	if err != nil {
		t.Fatal(err)
	}
	if c := pvc.Spec.StorageClassName; c == nil || *c != "corral-test-hostpath" || !pvc.Spec.Resources.Requests.Storage().Equal(resource.MustParse("64Mi")) ||
		len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce || pvc.Labels[sandbox.LabelTenant] != tenant {
		t.Errorf("claim = %+v %+v", pvc.Labels, pvc.Spec)
	}
	if out, code := run(a, "mkdir -p /mnt/data/sub && echo shared > /mnt/data/sub/f && ln -s / /mnt/data/out && cat /mnt/data/sub/f"); code != 0 || out != "shared\n" {
		t.Fatalf("write to the volume = %q, %d", out, code)
	}

	ro := named("data", "/mnt/ro")
	ro.Create, ro.SubPath, ro.ReadOnly = false, "sub", true
	b := spec(ro)
	if _, err := d.Create(ctx, b); err != nil {
		t.Fatalf("create with the tenant's volume, read-only at a sub-path: %v", err)
	}
	if out, code := run(b, "cat /mnt/ro/f"); code != 0 || out != "shared\n" {
		t.Errorf("read through the sub-path = %q, %d", out, code)
	}
	if out, code := run(b, "echo x > /mnt/ro/g"); code == 0 {
		t.Errorf("a write to a read-only volume succeeded: %q", out)
	}
	vols, err := d.ListVolumes(ctx, tenant)
	if err != nil || len(vols) != 1 || vols[0].Name != "data" || len(vols[0].InUseBy) != 2 {
		t.Errorf("ListVolumes = %+v, %v", vols, err)
	}
	if err := d.RemoveVolume(ctx, tenant, "data"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("RemoveVolume of a mounted volume = %v", err)
	}

	// The kubelet resolves a sub-path inside the volume; the link the
	// sandbox planted leads out, and the container is not made.
	esc := named("data", "/mnt/esc")
	esc.Create, esc.SubPath = false, "out"
	c := spec(esc)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	_, err = d.Create(cctx, c)
	cancel()
	if err == nil {
		out, _ := run(c, "ls /mnt/esc")
		t.Fatalf("a sub-path linking out of the volume was mounted; it shows %q", out)
	}
	t.Logf("sub-path escape refused: %v", err)
	if _, err := d.Inspect(ctx, c.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the refused create left its sandbox: %v", err)
	}

	// Made to go with its sandboxes: kept while another mounts it.
	scratch := named("scratch", "/scratch")
	scratch.DeleteWithSandbox = true
	e, f := spec(scratch), spec(scratch)
	for _, s := range []driver.Spec{e, f} {
		if _, err := d.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, code := run(e, "echo kept > /scratch/k"); code != 0 {
		t.Fatal("write to the scratch volume failed")
	}
	if err := d.Destroy(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	if out, code := run(f, "cat /scratch/k"); code != 0 || out != "kept\n" {
		t.Errorf("after its maker went, the other sandbox reads %q, %d", out, code)
	}
	if _, err := claim("scratch"); err != nil {
		t.Fatalf("the claim went while another sandbox mounts it: %v", err)
	}
	// ...and goes with the last, deleted by the controller at its expiry.
	if err := d.SetExpiry(ctx, f.ID, time.Now().Add(time.Second), driver.Change{At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the scratch claim to go with its last sandbox", func() bool {
		_, err := claim("scratch")
		return apierrors.IsNotFound(err)
	})

	// A claim that nothing binds: the reason is the scheduler's.
	slow := w.driverWith(t, Config{Endpoints: EndpointsPod, ReadyTimeout: 5 * time.Second})
	nobind := named("nobind", "/nb")
	nobind.StorageClass, nobind.DeleteWithSandbox = "corral-test-absent", true
	g := spec(nobind)
	if _, err := slow.Create(ctx, g); err == nil || !strings.Contains(err.Error(), "PersistentVolumeClaim") {
		t.Errorf("create with a claim no volume binds = %v, want the scheduler's reason", err)
	}
	testutil.WaitFor(t, time.Minute, "the unbound claim to go with its sandbox", func() bool {
		_, err := claim("nobind")
		return apierrors.IsNotFound(err)
	})

	for _, s := range []driver.Spec{a, b} {
		if err := d.Destroy(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.RemoveVolume(ctx, tenant, "data"); err != nil {
		t.Fatalf("RemoveVolume = %v", err)
	}
	if vols, err := d.ListVolumes(ctx, tenant); err != nil || len(vols) != 0 {
		t.Errorf("ListVolumes after the remove = %+v, %v", vols, err)
	}
}
