// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/hostnet/forward"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Create writes the Sandbox and its access Secret, then waits until the
// controller has the pod running and execd answers on the pod's address.
// On failure it deletes what it wrote.
func (d *Driver) Create(ctx context.Context, spec driver.Spec) (_ *driver.Handle, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := d.supports(spec); err != nil {
		return nil, err
	}
	if err := d.checkClaims(ctx, spec); err != nil {
		return nil, err
	}
	sbx := d.sandboxFor(spec)
	if sbx.Spec.PoolRef, err = d.poolFor(ctx, sbx, spec.Pool); err != nil {
		return nil, err
	}
	// The Secrets first, so that the controller finds the token when the
	// Sandbox arrives; they get the Sandbox as owner once it exists.
	secrets := d.secretsFor(spec)
	for i, sec := range secrets {
		if err := d.c.Create(ctx, sec); err != nil {
			if i > 0 || !apierrors.IsAlreadyExists(err) {
				d.deleteSecrets(context.WithoutCancel(ctx), secrets[:i])
			}
			return nil, apiErr("create sandbox "+spec.ID, err)
		}
	}
	if err := d.c.Create(ctx, sbx); err != nil {
		d.deleteSecrets(context.WithoutCancel(ctx), secrets)
		return nil, apiErr("create sandbox "+spec.ID, err)
	}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if derr := d.Destroy(cctx, spec.ID); derr != nil {
				d.cfg.Logger.WarnContext(ctx, "removing a sandbox that failed to start", "sandbox_id", spec.ID, "err", derr)
			}
		}
	}()
	if err := d.ensureClaims(ctx, spec, sbx); err != nil {
		return nil, err
	}
	owned := make(chan error, 1)
	go func() {
		owner := v1alpha1.OwnerRef(sbx, "Sandbox")
		for _, sec := range secrets {
			patch := client.MergeFrom(sec.DeepCopy())
			sec.OwnerReferences = []metav1.OwnerReference{owner}
			if err := d.c.Patch(ctx, sec, patch); err != nil {
				owned <- apiErr("own secret "+sec.Name, err)
				return
			}
		}
		owned <- nil
	}()
	err = d.waitReady(ctx, spec.ID)
	if oerr := <-owned; err == nil {
		err = oerr
	}
	if err != nil {
		return nil, err
	}
	return d.handleOf(sbx), nil
}

// supports refuses what this runtime cannot do yet, rather than run a
// sandbox with less than was asked.
func (d *Driver) supports(spec driver.Spec) error {
	switch {
	case len(spec.Entrypoint) == 0:
		return errdefs.Invalid(api.CodeInvalidParameter, "the entrypoint is empty")
	case spec.Image.URI == "":
		return errdefs.Invalid(api.CodeImageInvalidReference, "the image is empty")
	case spec.Snapshot != nil:
		return errdefs.New(errdefs.ErrNotImplemented, api.CodeAPINotSupported, "the kubernetes runtime cannot start from snapshots")
	case spec.CredentialProxy:
		return errdefs.New(errdefs.ErrNotImplemented, api.CodeAPINotSupported,
			"the kubernetes runtime has no credential vault yet")
	case spec.Policed() && spec.EgressToken == "":
		return errdefs.Invalid(api.CodeInvalidParameter, "a network policy needs an egress token")
	case spec.SecretsDir != "":
		return errdefs.New(errdefs.ErrNotImplemented, api.CodeAPINotSupported, "the kubernetes runtime does not serve secrets on demand yet")
	case slices.ContainsFunc(spec.Volumes, func(v sandbox.Volume) bool { return v.Kind == sandbox.VolumeHost }):
		return errdefs.Invalid(api.CodeVolumeUnsupported,
			"the kubernetes runtime does not mount host volumes: a host path is a node's, which the server cannot check; use a pvc volume")
	case spec.Resources.Pids > 0:
		// Limits are never dropped: a pod has no limit of its own on
		// processes; the node's kubelet sets one for every pod.
		return errdefs.Invalid(api.CodeInvalidResourceLimit,
			"resourceLimits.pids: the kubernetes runtime cannot limit one sandbox's processes; the nodes' kubelet limits every pod's (podPidsLimit)")
	}
	return nil
}

func (d *Driver) sandboxFor(spec driver.Spec) *v1alpha1.Sandbox {
	lbl := map[string]string{
		sandbox.LabelSandboxID: spec.ID,
		sandbox.LabelManaged:   "true",
		sandbox.LabelTenant:    spec.Tenant,
	}
	if d.cfg.ServerID != "" {
		lbl[sandbox.LabelServer] = d.cfg.ServerID
	}
	ann := map[string]string{}
	if len(spec.Labels) > 0 {
		b, _ := json.Marshal(spec.Labels)
		ann[annotationLabels] = string(b)
	}
	var env []corev1.EnvVar
	for k, v := range spec.Env {
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	sortEnv(env)
	sbx := &v1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: spec.ID, Namespace: d.cfg.Namespace, Labels: lbl, Annotations: ann},
		Spec: v1alpha1.SandboxSpec{
			Image:            spec.Image.URI,
			ImagePullPolicy:  d.cfg.ImagePullPolicy,
			Entrypoint:       spec.Entrypoint,
			Env:              env,
			AccessSecretName: accessSecret(spec.ID),
			Tenant:           spec.Tenant,
			Volumes:          sandboxVolumes(spec),
		},
	}
	if !spec.ExpiresAt.IsZero() {
		sbx.Spec.ExpireTime = expireTime(spec.ExpiresAt)
	}
	if spec.Policed() {
		sbx.Spec.Egress = &v1alpha1.SandboxEgress{Policy: string(spec.NetworkPolicy)}
	}
	if spec.Image.Username != "" || spec.Image.Password != "" {
		sbx.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: pullSecret(spec.ID)}}
	}
	lim := corev1.ResourceList{}
	if m := spec.Resources.CPUMillis; m > 0 {
		lim[corev1.ResourceCPU] = *resource.NewMilliQuantity(m, resource.DecimalSI)
	}
	if b := spec.Resources.MemoryBytes; b > 0 {
		lim[corev1.ResourceMemory] = *resource.NewQuantity(b, resource.BinarySI)
	}
	if b := spec.Resources.DiskBytes; b > 0 {
		// The kubelet evicts a pod that writes more than this.
		lim[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(b, resource.BinarySI)
	}
	if len(lim) > 0 {
		sbx.Spec.Resources.Limits = lim
	}
	return sbx
}

// poolFor names a SandboxPool of the namespace whose pods are what sbx
// asks for, with warm pods ready; "" if none is. A pool made for a
// template serves only the creates from it (key). The controller adopts
// one of its pods, or starts a pod as usual if they are gone by then.
func (d *Driver) poolFor(ctx context.Context, sbx *v1alpha1.Sandbox, key string) (string, error) {
	var pools v1alpha1.SandboxPoolList
	if err := d.c.List(ctx, &pools, client.InNamespace(d.cfg.Namespace)); err != nil {
		return "", apiErr("list pools", err)
	}
	best := ""
	var ready int32
	for _, p := range pools.Items {
		if tp, ok := p.Labels[labelTemplatePool]; ok && (key == "" || tp != poolDigest(key) || p.Name != d.templatePoolName(key)) {
			continue
		}
		if p.Spec.Template.Matches(sbx) && p.Status.Ready > ready {
			best, ready = p.Name, p.Status.Ready
		}
	}
	return best, nil
}

// deleteSecrets removes Secrets that no Sandbox owns (yet).
func (d *Driver) deleteSecrets(ctx context.Context, secrets []*corev1.Secret) {
	for _, sec := range secrets {
		if err := d.c.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
			d.cfg.Logger.WarnContext(ctx, "removing a secret of a sandbox that failed to start", "secret", sec.Name, "err", err)
		}
	}
}

func accessSecret(id string) string { return "corral-" + id }
func pullSecret(id string) string   { return "corral-" + id + "-pull" }

// secretsFor are the Secrets the Sandbox owns: execd's token and, with
// registry credentials, an image pull secret.
func (d *Driver) secretsFor(spec driver.Spec) []*corev1.Secret {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: name, Namespace: d.cfg.Namespace,
			Labels: map[string]string{sandbox.LabelManaged: "true", sandbox.LabelSandboxID: spec.ID},
		}
	}
	out := []*corev1.Secret{{
		ObjectMeta: meta(accessSecret(spec.ID)),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{v1alpha1.TokenKey: []byte(spec.ExecdToken)},
	}}
	if spec.Policed() {
		out[0].Data[v1alpha1.EgressTokenKey] = []byte(spec.EgressToken)
	}
	if spec.Image.Username != "" || spec.Image.Password != "" {
		auth := base64.StdEncoding.EncodeToString([]byte(spec.Image.Username + ":" + spec.Image.Password))
		cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{registryOf(spec.Image.URI): map[string]string{
			"username": spec.Image.Username, "password": spec.Image.Password, "auth": auth,
		}}})
		out = append(out, &corev1.Secret{
			ObjectMeta: meta(pullSecret(spec.ID)),
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
		})
	}
	return out
}

// registryOf is the registry host of an image reference, as the
// kubelet's credential lookup keys it.
func registryOf(ref string) string {
	first, _, ok := strings.Cut(ref, "/")
	if ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return first
	}
	return "https://index.docker.io/v1/"
}

// waitReady waits for the pod to run and execd to answer on its address.
func (d *Driver) waitReady(ctx context.Context, id string) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ReadyTimeout)
	defer cancel()
	var last *v1alpha1.Sandbox
	err := d.awaitRunning(ctx, id, &last)
	if err == nil {
		// execd starts within milliseconds of the container; no event
		// tells when it listens, so it is pinged until it answers (and
		// the Sandbox looked at in between: it may have exited). The
		// address is asked for at every try: a port-forward that a
		// refused connection ended is made again.
		dial := func(ctx context.Context) (net.Conn, error) {
			addr, err := d.endpoint(ctx, last, insandbox.ExecdPort)
			if err != nil {
				return nil, err
			}
			var nd net.Dialer
			return nd.DialContext(ctx, "tcp", addr.String())
		}
		err = forward.AwaitPing(ctx, dial, func(ctx context.Context) error { return d.stillStarting(ctx, id, &last) }, time.Millisecond, 5*time.Millisecond)
	}
	if err != nil && ctx.Err() != nil {
		if parent := context.Cause(ctx); errors.Is(parent, context.DeadlineExceeded) && time.Since(start) >= d.cfg.ReadyTimeout {
			why := ""
			if last != nil {
				if c := meta.FindStatusCondition(last.Status.Conditions, v1alpha1.ConditionScheduled); c != nil && c.Status != metav1.ConditionTrue && c.Message != "" {
					// Such as a claim no volume binds to.
					why = ": the pod is not scheduled: " + c.Message
				}
			}
			return errdefs.Newf(errdefs.ErrUnavailable, api.CodeSandboxStartFailed, "sandbox %s: not ready within %v%s", id, d.cfg.ReadyTimeout, why)
		}
		return ctx.Err()
	}
	return err
}

// awaitRunning waits, on the cache's changes, until Sandbox id runs, and
// leaves it in last; a Sandbox that failed, exited or went away ends the
// wait with why.
func (d *Driver) awaitRunning(ctx context.Context, id string, last **v1alpha1.Sandbox) error {
	for {
		ch := d.changes()
		// From the cache only: had a read from the API server said ready,
		// a read just after Create returned could still find the cache's
		// older copy (not running yet, no pod).
		if err := d.stillStarting(ctx, id, last); err != nil {
			return err
		}
		if *last != nil && (*last).Status.Phase == v1alpha1.SandboxRunning {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stillStarting reads Sandbox id from the cache into last, and says why
// it will not become ready if it will not: it failed, exited, or was
// deleted (once seen; the cache may not have the one just written yet).
func (d *Driver) stillStarting(ctx context.Context, id string, last **v1alpha1.Sandbox) error {
	sbx, err := d.cached(ctx, id)
	switch {
	case errors.Is(err, errdefs.ErrNotFound) && *last != nil:
		return errdefs.Newf(errdefs.ErrUnavailable, api.CodeSandboxStartFailed, "sandbox %s was deleted while it started", id)
	case errors.Is(err, errdefs.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	*last = sbx
	switch sbx.Status.Phase {
	case v1alpha1.SandboxFailed:
		return startFailure(id, sbx)
	case v1alpha1.SandboxExited:
		e := exitOf(sbx)
		return driver.ExitedDuringStart(id, e.Code, e.Reason, "", nil)
	}
	return nil
}

// userFailures are the Failed reasons the creator can fix (the image, the
// spec); the rest are the cluster's or the operator's.
var userFailures = map[string]bool{
	"ImageNotPresent": true, "InvalidImage": true, "ImagePullFailed": true,
	"InvalidContainerConfig": true, "ContainerStartFailed": true, "PodRejected": true, "InvalidVolume": true,
}

// startFailure turns the Failed condition into an error a user can act on.
func startFailure(id string, sbx *v1alpha1.Sandbox) error {
	kind := errdefs.ErrUnavailable
	c := meta.FindStatusCondition(sbx.Status.Conditions, v1alpha1.ConditionFailed)
	if c != nil && c.Reason == v1alpha1.ReasonMountThroughLink {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeVolumeInvalidMountPath, "sandbox %s did not start: %s", id, c.Message)
	}
	if c != nil && userFailures[c.Reason] {
		kind = errdefs.ErrInvalidArgument
	}
	return errdefs.Newf(kind, api.CodeSandboxStartFailed, "sandbox %s did not start: %s", id, failure(sbx))
}

func sortEnv(env []corev1.EnvVar) {
	slices.SortFunc(env, func(a, b corev1.EnvVar) int { return strings.Compare(a.Name, b.Name) })
}
