// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/sandbox"
)

// A template's warm pool is a SandboxPool the server writes, named after
// the template's pool key and labelled with it: the controller keeps its
// pods warm, and a create from the template is adopted from it (only such
// creates are: other creates pass over pools labelled for a template).

// labelTemplatePool marks a SandboxPool made for a template; its value is
// a digest of the pool key.
const labelTemplatePool = "corral.dev/template-pool"

// templatePoolName is the SandboxPool of pool key on this server.
func (d *Driver) templatePoolName(key string) string {
	return "corral-tpl-" + poolDigest(d.cfg.ServerID, key)[:20]
}

func poolDigest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:40]
}

// Warmable implements driver.PoolSizer: why a create of spec cannot be
// adopted from a warm pod, or nil.
func (d *Driver) Warmable(spec driver.Spec) error {
	if err := d.supports(driver.Spec{Entrypoint: []string{"x"}, Image: spec.Image, Snapshot: spec.Snapshot, CredentialProxy: spec.CredentialProxy,
		SecretsDir: spec.SecretsDir, Volumes: spec.Volumes, Resources: spec.Resources}); err != nil {
		return err
	}
	switch {
	case len(spec.Volumes) > 0:
		return errors.New("volumes are mounted when a pod is made")
	case spec.Image.Username != "" || spec.Image.Password != "":
		return errors.New("a create's own registry credentials are its pod's")
	}
	return nil
}

// Claim implements driver.Pooler: a kubernetes sandbox is adopted from a
// pool by the controller, at its create, under its own ID.
func (d *Driver) Claim(driver.Spec) (string, bool) { return "", false }

// SetPool implements driver.PoolSizer: the SandboxPool of key is made or
// changed to keep n warm pods like spec's (image, limits, egress); 0
// deletes it. Several servers setting it at once end with the same pool.
func (d *Driver) SetPool(key string, spec driver.Spec, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.setPool(ctx, key, spec, n); err != nil {
		d.cfg.Logger.WarnContext(ctx, "a template's SandboxPool could not be written", "pool", key, "err", err)
	}
}

func (d *Driver) setPool(ctx context.Context, key string, spec driver.Spec, n int) error {
	name := d.templatePoolName(key)
	for attempt := 0; attempt < 10; attempt++ {
		var cur v1alpha1.SandboxPool
		err := d.api.Get(ctx, client.ObjectKey{Namespace: d.cfg.Namespace, Name: name}, &cur)
		switch {
		case apierrors.IsNotFound(err) && n == 0:
			return nil
		case apierrors.IsNotFound(err):
			p := &v1alpha1.SandboxPool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.cfg.Namespace, Labels: d.poolLabels(key)}}
			p.Spec = d.poolSpec(spec, n)
			err = d.c.Create(ctx, p)
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return err
		case err != nil:
			return err
		case n == 0:
			return client.IgnoreNotFound(d.c.Delete(ctx, &cur, client.Preconditions{UID: &cur.UID}))
		}
		cur.Spec = d.poolSpec(spec, n)
		err = d.c.Update(ctx, &cur)
		if apierrors.IsConflict(err) {
			continue
		}
		return err
	}
	return errors.New("the pool kept changing under other writers")
}

func (d *Driver) poolLabels(key string) map[string]string {
	l := map[string]string{sandbox.LabelManaged: "true", labelTemplatePool: poolDigest(key)}
	if d.cfg.ServerID != "" {
		l[sandbox.LabelServer] = d.cfg.ServerID
	}
	return l
}

// poolSpec is a pool of n pods that a Sandbox made for spec matches.
func (d *Driver) poolSpec(spec driver.Spec, n int) v1alpha1.SandboxPoolSpec {
	spec.ID, spec.Tenant, spec.Entrypoint = "pool", "", []string{"x"}
	sbx := d.sandboxFor(spec)
	return v1alpha1.SandboxPoolSpec{Warm: int32(n), Template: v1alpha1.SandboxTemplate{
		Image: sbx.Spec.Image, ImagePullPolicy: sbx.Spec.ImagePullPolicy, Resources: sbx.Spec.Resources,
		RuntimeClassName: sbx.Spec.RuntimeClassName, Egress: sbx.Spec.Egress != nil,
	}}
}

// Ready implements driver.PoolSizer: the pool's ready pods, as the
// controller last counted them.
func (d *Driver) Ready(key string) int {
	var p v1alpha1.SandboxPool
	if err := d.c.Get(context.Background(), client.ObjectKey{Namespace: d.cfg.Namespace, Name: d.templatePoolName(key)}, &p); err != nil {
		return 0
	}
	return int(p.Status.Ready)
}

var _ driver.PoolSizer = (*Driver)(nil)
