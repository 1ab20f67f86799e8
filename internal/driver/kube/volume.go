// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/sandbox"
)

// A tenant's named volume is a PersistentVolumeClaim of the namespace,
// corral-<tenant key>-<name>, labelled with its tenant, its name and this
// server. One made with deleteOnSandboxTermination is owned by every
// Sandbox that mounts it, so the garbage collector removes it with the
// last of them, whoever deletes it (the server, or the controller at
// expiry); the owner references block the Sandbox's foreground delete
// until the claim is gone, so Destroy returns after it.
const (
	// labelVolume is a claim's name in the create request.
	labelVolume = "corral.dev/volume"
	// labelDeleteWith marks a claim that goes with the Sandboxes that
	// mount it.
	labelDeleteWith = "corral.dev/delete-with-sandbox"
	// DefaultVolumeSize is a new claim's request when the create gives no
	// pvc.storage and the server no default of its own.
	DefaultVolumeSize = 1 << 30
)

// claimName is the claim of tenant's named volume.
func claimName(tenant, name string) string {
	return "corral-" + sandbox.TenantKey(tenant) + "-" + name
}

// ourClaim reports whether pvc is tenant's named volume of this server,
// not being deleted.
func (d *Driver) ourClaim(pvc *corev1.PersistentVolumeClaim, tenant string) bool {
	l := pvc.Labels
	return l[sandbox.LabelManaged] == "true" && l[sandbox.LabelTenant] == tenant && l[labelVolume] != "" &&
		pvc.Name == claimName(tenant, l[labelVolume]) &&
		(d.cfg.ServerID == "" || l[sandbox.LabelServer] == d.cfg.ServerID)
}

// readClaim reads a claim from the API server (claims are not cached:
// this server reads them at creates and volume requests only); nil if
// there is none.
func (d *Driver) readClaim(ctx context.Context, name string) (*corev1.PersistentVolumeClaim, error) {
	var pvc corev1.PersistentVolumeClaim
	err := d.api.Get(ctx, types.NamespacedName{Namespace: d.cfg.Namespace, Name: name}, &pvc)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, apiErr("read claim "+name, err)
	}
	return &pvc, nil
}

// checkClaims refuses, before anything is written, a create whose named
// volumes cannot be had: one missing that it may not make, one that is
// being deleted, one of that name that is not the tenant's.
func (d *Driver) checkClaims(ctx context.Context, spec driver.Spec) error {
	for _, v := range spec.Volumes {
		if v.Kind != sandbox.VolumeNamed {
			continue
		}
		pvc, err := d.readClaim(ctx, claimName(spec.Tenant, v.Claim))
		switch {
		case err != nil:
			return err
		case pvc == nil && !v.Create:
			return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumePVCNotFound,
				"volume %q: named volume %s does not exist (and createIfNotExists is false)", v.Name, v.Claim)
		case pvc == nil:
		case !d.ourClaim(pvc, spec.Tenant):
			return errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeVolumeInUse,
				"volume %q: the namespace has a claim named %s that corral did not make for this tenant", v.Name, pvc.Name)
		case pvc.DeletionTimestamp != nil:
			return errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeVolumeInUse,
				"volume %q: named volume %s is being deleted; try again once it is gone", v.Name, v.Claim)
		}
	}
	return nil
}

// claimFor is the claim a create makes for v.
func (d *Driver) claimFor(spec driver.Spec, v sandbox.Volume) *corev1.PersistentVolumeClaim {
	lbl := map[string]string{sandbox.LabelManaged: "true", sandbox.LabelTenant: spec.Tenant, labelVolume: v.Claim}
	if d.cfg.ServerID != "" {
		lbl[sandbox.LabelServer] = d.cfg.ServerID
	}
	if v.DeleteWithSandbox {
		lbl[labelDeleteWith] = "true"
	}
	size := v.SizeBytes
	if size == 0 {
		size = d.cfg.VolumeSize
	}
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	if len(v.AccessModes) > 0 {
		modes = nil
		for _, m := range v.AccessModes {
			modes = append(modes, corev1.PersistentVolumeAccessMode(m))
		}
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claimName(spec.Tenant, v.Claim), Namespace: d.cfg.Namespace, Labels: lbl},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: modes,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI),
			}},
		},
	}
	if c := v.StorageClass; c != "" {
		pvc.Spec.StorageClassName = &c
	} else if c := d.cfg.StorageClass; c != "" {
		pvc.Spec.StorageClassName = &c
	}
	return pvc
}

// ensureClaims makes the named volumes sbx (just written) mounts that do
// not exist yet, and makes sbx an owner of each it mounts that goes with
// its sandboxes. The pod waits for its claims, so this runs after the
// Sandbox exists: a server killed before the owner is set leaves no claim
// that nothing would delete.
func (d *Driver) ensureClaims(ctx context.Context, spec driver.Spec, sbx *v1alpha1.Sandbox) error {
	owner := metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Sandbox", Name: sbx.Name, UID: sbx.UID}
	yes := true
	owner.BlockOwnerDeletion = &yes
	for _, v := range spec.Volumes {
		if v.Kind != sandbox.VolumeNamed {
			continue
		}
		want := d.claimFor(spec, v)
		if v.DeleteWithSandbox {
			want.OwnerReferences = []metav1.OwnerReference{owner}
		}
		err := d.c.Create(ctx, want)
		if err == nil {
			continue
		}
		if !apierrors.IsAlreadyExists(err) {
			return apiErr("create claim for volume "+v.Claim, err)
		}
		pvc, err := d.readClaim(ctx, want.Name)
		switch {
		case err != nil:
			return err
		case pvc == nil || pvc.DeletionTimestamp != nil:
			return errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeVolumeInUse,
				"volume %q: named volume %s was deleted while the sandbox started", v.Name, v.Claim)
		case !d.ourClaim(pvc, spec.Tenant):
			return errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeVolumeInUse,
				"volume %q: the namespace has a claim named %s that corral did not make for this tenant", v.Name, pvc.Name)
		case pvc.Labels[labelDeleteWith] != "true":
			continue
		}
		// A claim that goes with its sandboxes now goes with this one too.
		patch := client.MergeFromWithOptions(pvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		pvc.OwnerReferences = append(pvc.OwnerReferences, owner)
		if err := d.c.Patch(ctx, pvc, patch); err != nil {
			if apierrors.IsConflict(err) {
				return errdefs.Newf(errdefs.ErrUnavailable, api.CodeVolumeInUse,
					"volume %q: named volume %s changed while the sandbox started; try again", v.Name, v.Claim)
			}
			return apiErr("own claim "+pvc.Name, err)
		}
	}
	return nil
}

// sandboxVolumes are the claims sbx mounts, as its spec names them.
func sandboxVolumes(spec driver.Spec) []v1alpha1.SandboxVolume {
	var out []v1alpha1.SandboxVolume
	for _, v := range spec.Volumes {
		if v.Kind == sandbox.VolumeNamed {
			out = append(out, v1alpha1.SandboxVolume{
				Name: v.Name, ClaimName: claimName(spec.Tenant, v.Claim), MountPath: v.Target, SubPath: v.SubPath, ReadOnly: v.ReadOnly,
			})
		}
	}
	return out
}

// claimUsers maps each claim to the sandboxes of tenant (not being
// deleted) that mount it.
func (d *Driver) claimUsers(ctx context.Context, tenant string) (map[string][]string, error) {
	var list v1alpha1.SandboxList
	if err := d.c.List(ctx, &list, client.InNamespace(d.cfg.Namespace), client.MatchingLabels{sandbox.LabelTenant: tenant}); err != nil {
		return nil, apiErr("list sandboxes", err)
	}
	users := map[string][]string{}
	for _, sbx := range list.Items {
		if sbx.DeletionTimestamp != nil {
			continue
		}
		for _, v := range sbx.Spec.Volumes {
			if !slices.Contains(users[v.ClaimName], sbx.Name) {
				users[v.ClaimName] = append(users[v.ClaimName], sbx.Name)
			}
		}
	}
	return users, nil
}

// ListVolumes implements driver.Volumer.
func (d *Driver) ListVolumes(ctx context.Context, tenant string) ([]driver.VolumeInfo, error) {
	sel := client.MatchingLabels{sandbox.LabelManaged: "true", sandbox.LabelTenant: tenant}
	if d.cfg.ServerID != "" {
		sel[sandbox.LabelServer] = d.cfg.ServerID
	}
	var list corev1.PersistentVolumeClaimList
	if err := d.api.List(ctx, &list, client.InNamespace(d.cfg.Namespace), sel); err != nil {
		return nil, apiErr("list claims", err)
	}
	users, err := d.claimUsers(ctx, tenant)
	if err != nil {
		return nil, err
	}
	var out []driver.VolumeInfo
	for i := range list.Items {
		pvc := &list.Items[i]
		if !d.ourClaim(pvc, tenant) || pvc.DeletionTimestamp != nil {
			continue
		}
		size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		out = append(out, driver.VolumeInfo{Name: pvc.Labels[labelVolume], CreatedAt: pvc.CreationTimestamp.Time, InUseBy: users[pvc.Name],
			SizeBytes: size.Value()})
	}
	return out, nil
}

// RemoveVolume implements driver.Volumer. The claim's storage then goes
// as its storage class's reclaim policy says.
func (d *Driver) RemoveVolume(ctx context.Context, tenant, name string) error {
	pvc, err := d.readClaim(ctx, claimName(tenant, name))
	if err != nil {
		return err
	}
	if pvc == nil || !d.ourClaim(pvc, tenant) || pvc.DeletionTimestamp != nil {
		return errdefs.Newf(errdefs.ErrNotFound, api.CodeVolumeNotFound, "volume %s not found", name)
	}
	users, err := d.claimUsers(ctx, tenant)
	if err != nil {
		return err
	}
	if u := users[pvc.Name]; len(u) > 0 {
		return errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeVolumeInUse, "volume %s is mounted by sandbox %s", name, u[0])
	}
	uid := pvc.UID
	err = d.c.Delete(ctx, pvc, client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return errdefs.Newf(errdefs.ErrNotFound, api.CodeVolumeNotFound, "volume %s not found", name)
	}
	if err != nil {
		return apiErr(fmt.Sprintf("delete claim %s", pvc.Name), err)
	}
	return nil
}
