// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package kube is the Kubernetes driver (`corral serve --runtime
// kubernetes`): each sandbox is a Sandbox custom resource that corral's
// controller (internal/kube/controller) runs as a Pod. The driver writes
// Sandboxes and an access Secret each Sandbox owns, and reads them back
// from an informer cache that a watch keeps current, so no request lists
// the cluster. It keeps no sandbox state of its own: a fresh driver, or
// another server, finds every sandbox from the Sandboxes. execd is reached
// on the pod's address. Imported only by internal/cli.
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/kube/apierr"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/kube/kubeconfig"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Name is the runtime name the lifecycle API and `serve --runtime` use.
const Name = "kubernetes"

// stateVersion is the schema of Handle.State.
const stateVersion = 1

// annotationLabels carries the user's metadata, which need not be valid
// Kubernetes label values.
const annotationLabels = "corral.dev/labels"

// annotationExpiryAsOf names the change of the record whose expiry
// expireTime copies ("rev:<revision>" or an RFC 3339 time): the fence that
// orders concurrent renews.
const annotationExpiryAsOf = "corral.dev/expiry-as-of"

func changeFence(of driver.Change) string {
	if _, err := strconv.ParseUint(of.Version, 10, 64); err == nil {
		return "rev:" + of.Version
	}
	return of.At.UTC().Format(time.RFC3339Nano)
}

// fenceBefore reports whether the change prev names came before next; an
// absent or incomparable prev does.
func fenceBefore(prev, next string) bool {
	pv, okP := strings.CutPrefix(prev, "rev:")
	nv, okN := strings.CutPrefix(next, "rev:")
	switch {
	case okP && okN:
		p, errP := strconv.ParseUint(pv, 10, 64)
		n, errN := strconv.ParseUint(nv, 10, 64)
		return errP != nil || errN != nil || p < n
	case !okP && !okN:
		p, errP := time.Parse(time.RFC3339Nano, prev)
		n, errN := time.Parse(time.RFC3339Nano, next)
		return errP != nil || errN != nil || p.Before(n)
	}
	return true
}

// Config configures the driver.
type Config struct {
	// REST reaches the cluster's API server.
	REST *rest.Config
	// Namespace holds the sandboxes.
	Namespace string
	// ImagePullPolicy applies to sandbox images; empty means the
	// cluster's default for the tag.
	ImagePullPolicy corev1.PullPolicy
	// ServerID, when set, labels this server's Sandboxes (corral.dev/server)
	// and limits List, and so the lifecycle's orphan sweep, to them: a
	// second server in the namespace, or one whose database was lost, never
	// deletes sandboxes it did not make.
	ServerID string
	// Endpoints says how sandbox ports are reached: EndpointsAuto (the
	// default), EndpointsPod or EndpointsPortForward.
	Endpoints string
	// ReadyTimeout bounds how long Create waits for execd (default 2 min:
	// a cold image pull counts).
	ReadyTimeout time.Duration
	// StorageClass is the storage class of the claims named volumes
	// make when the create names none; empty: the cluster's default.
	StorageClass string
	// VolumeSize is a new claim's request when the create gives no
	// pvc.storage (default DefaultVolumeSize).
	VolumeSize int64
	Logger     *slog.Logger
}

// Driver runs sandboxes as Sandbox resources.
type Driver struct {
	cfg   Config
	c     client.Client // reads from the cache
	api   client.Reader // reads from the API server
	cache cache.Cache
	stop  func()

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every Sandbox event

	fwd forwards
	// core reads pods' logs.
	core corev1client.CoreV1Interface
}

type state struct {
	Namespace string    `json:"namespace"`
	UID       types.UID `json:"uid"`
}

// New connects to the cluster and fills the cache before it returns.
func New(ctx context.Context, cfg Config) (*Driver, error) {
	if cfg.REST == nil {
		return nil, errors.New("kube: no cluster configuration")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 2 * time.Minute
	}
	if cfg.VolumeSize <= 0 {
		cfg.VolumeSize = DefaultVolumeSize
	}
	switch cfg.Endpoints {
	case "", EndpointsAuto:
		cfg.Endpoints = EndpointsPortForward
		if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
			cfg.Endpoints = EndpointsPod
		}
	case EndpointsPod, EndpointsPortForward:
	default:
		return nil, fmt.Errorf("kube: endpoints %q: want %s, %s or %s", cfg.Endpoints, EndpointsAuto, EndpointsPod, EndpointsPortForward)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	scheme, err := v1alpha1.Scheme()
	if err != nil {
		return nil, err
	}
	ours := labels.Set{sandbox.LabelManaged: "true"}
	if cfg.ServerID != "" {
		ours[sandbox.LabelServer] = cfg.ServerID
	}
	ca, err := cache.New(cfg.REST, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{cfg.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&v1alpha1.Sandbox{}: {Label: labels.SelectorFromSet(ours)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	c, err := client.New(cfg.REST, client.Options{Scheme: scheme, Cache: &client.CacheOptions{
		Reader:     ca,
		DisableFor: []client.Object{&corev1.Secret{}},
	}})
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	api, err := client.New(cfg.REST, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	core, err := corev1client.NewForConfig(cfg.REST)
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	d := &Driver{cfg: cfg, c: c, api: api, cache: ca, core: core, changed: make(chan struct{})}
	inf, err := ca.GetInformer(ctx, &v1alpha1.Sandbox{})
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	// The pools are read at every create: started now, not on first use.
	if _, err := ca.GetInformer(ctx, &v1alpha1.SandboxPool{}); err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	notify := func(any) { d.notify() }
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, o any) { d.notify() },
		DeleteFunc: notify,
	}); err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	if d.stop, err = kubeconfig.StartCache(ctx, ca, cfg.Logger,
		fmt.Sprintf("kube: could not list Sandboxes in namespace %s (is the CRD installed, and may this server list it?)", cfg.Namespace)); err != nil {
		return nil, err
	}
	return d, nil
}

// Close ends the port-forwards and stops the cache.
func (d *Driver) Close() error {
	d.stopForwards("")
	d.stop()
	return nil
}

func (d *Driver) notify() {
	d.mu.Lock()
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

// changes returns a channel closed at the next Sandbox event.
func (d *Driver) changes() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

// get reads a Sandbox from the cache, or from the API server when the
// cache has none (it may not have seen a Sandbox another server created a
// moment ago: "gone" must never be concluded from a lagging cache);
// ErrNotFound if absent or being deleted.
func (d *Driver) get(ctx context.Context, id string) (*v1alpha1.Sandbox, error) {
	return d.read(ctx, id, true)
}

// cached is get from the cache alone: what it returns is never older than
// what a later get returns from the cache, which a read from the API
// server can be (the cache catches up later, from further back).
func (d *Driver) cached(ctx context.Context, id string) (*v1alpha1.Sandbox, error) {
	return d.read(ctx, id, false)
}

func (d *Driver) read(ctx context.Context, id string, orAPI bool) (*v1alpha1.Sandbox, error) {
	var sbx v1alpha1.Sandbox
	key := types.NamespacedName{Namespace: d.cfg.Namespace, Name: id}
	err := d.c.Get(ctx, key, &sbx)
	if apierrors.IsNotFound(err) && orAPI {
		err = d.api.Get(ctx, key, &sbx)
		if err == nil && d.cfg.ServerID != "" && sbx.Labels[sandbox.LabelServer] != d.cfg.ServerID {
			err = apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("sandboxes").GroupResource(), id)
		}
	}
	if err != nil {
		return nil, apiErr("get sandbox "+id, err)
	}
	if !sbx.DeletionTimestamp.IsZero() {
		return nil, errdefs.Newf(errdefs.ErrNotFound, api.CodeSandboxNotFound, "sandbox %s is being deleted", id)
	}
	return &sbx, nil
}

// await calls cond on the cached Sandbox at every change until it
// reports done, the Sandbox vanishes (cond gets nil) or ctx ends.
func (d *Driver) await(ctx context.Context, id string, cond func(*v1alpha1.Sandbox) (bool, error)) error {
	for {
		ch := d.changes()
		sbx, err := d.get(ctx, id)
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return err
		}
		if done, err := cond(sbx); done || err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Recover checks that the Sandbox the handle names still exists; the
// cache already watches it.
func (d *Driver) Recover(ctx context.Context, h *driver.Handle) error {
	var st state
	if err := json.Unmarshal(h.State, &st); err != nil {
		return fmt.Errorf("kube: handle of %s: %w", h.ID, err)
	}
	if st.Namespace != d.cfg.Namespace {
		return errdefs.Newf(errdefs.ErrNotFound, api.CodeSandboxNotFound,
			"sandbox %s is in namespace %s, this server uses %s", h.ID, st.Namespace, d.cfg.Namespace)
	}
	sbx, err := d.get(ctx, h.ID)
	if err != nil {
		return err
	}
	if sbx.UID != st.UID {
		return errdefs.Newf(errdefs.ErrNotFound, api.CodeSandboxNotFound, "sandbox %s was replaced by another of the same name", h.ID)
	}
	return nil
}

// Inspect maps the Sandbox's status onto the driver's phases.
func (d *Driver) Inspect(ctx context.Context, id string) (driver.Status, error) {
	sbx, err := d.get(ctx, id)
	if err != nil {
		return driver.Status{}, err
	}
	return statusOf(sbx), nil
}

func statusOf(sbx *v1alpha1.Sandbox) driver.Status {
	var st driver.Status
	if t := sbx.Status.StartedAt; t != nil {
		st.StartedAt = t.Time
	}
	switch sbx.Status.Phase {
	case v1alpha1.SandboxRunning:
		st.Phase = driver.PhaseRunning
	case v1alpha1.SandboxExited, v1alpha1.SandboxFailed:
		st.Phase = driver.PhaseExited
		st.Exit = exitOf(sbx)
	default:
		st.Phase = driver.PhaseCreating
	}
	return st
}

func exitOf(sbx *v1alpha1.Sandbox) *driver.Exit {
	e := &driver.Exit{Code: -1, Reason: sbx.Status.ExitReason}
	if c := sbx.Status.ExitCode; c != nil {
		e.Code = int(*c)
	}
	if t := sbx.Status.FinishedAt; t != nil {
		e.At = t.Time
	}
	if sbx.Status.Phase == v1alpha1.SandboxFailed {
		if c := failure(sbx); c != "" {
			e.Reason = c
		}
	}
	return e
}

// failure is the Failed condition's reason and message, if it is true.
func failure(sbx *v1alpha1.Sandbox) string {
	c := meta.FindStatusCondition(sbx.Status.Conditions, v1alpha1.ConditionFailed)
	switch {
	case c == nil || c.Status != metav1.ConditionTrue:
		return ""
	case c.Message == "":
		return c.Reason
	}
	return c.Reason + ": " + c.Message
}

// handleOf is the handle of a Sandbox this driver made or imports.
func (d *Driver) handleOf(sbx *v1alpha1.Sandbox) *driver.Handle {
	st, _ := json.Marshal(state{Namespace: d.cfg.Namespace, UID: sbx.UID})
	return &driver.Handle{ID: sbx.Name, Driver: Name, Version: stateVersion, State: st}
}

// Wait blocks until the entrypoint has ended.
func (d *Driver) Wait(ctx context.Context, id string) (driver.Exit, error) {
	var exit driver.Exit
	err := d.await(ctx, id, func(sbx *v1alpha1.Sandbox) (bool, error) {
		if sbx == nil {
			return false, errdefs.Newf(errdefs.ErrNotFound, api.CodeSandboxNotFound, "sandbox %s not found", id)
		}
		if st := statusOf(sbx); st.Phase == driver.PhaseExited {
			exit = *st.Exit
			return true, nil
		}
		return false, nil
	})
	return exit, err
}

// Stop asks the controller to end the entrypoint; the pod's grace period
// (10 s) applies rather than grace.
func (d *Driver) Stop(ctx context.Context, id string, _ time.Duration) error {
	sbx, err := d.get(ctx, id)
	if err != nil {
		return err
	}
	d.stopForwards(id)
	if sbx.Spec.Stopped {
		return nil
	}
	patch := client.MergeFrom(sbx.DeepCopy())
	sbx.Spec.Stopped = true
	return apiErr("stop sandbox "+id, d.c.Patch(ctx, sbx, patch))
}

// SetExpiry moves the Sandbox's expireTime; the controller deletes it
// then.
func (d *Driver) SetExpiry(ctx context.Context, id string, at time.Time, of driver.Change) error {
	fence := changeFence(of)
	for attempt := 0; ; attempt++ {
		ch := d.changes()
		sbx, err := d.get(ctx, id)
		if err != nil {
			return err
		}
		if !fenceBefore(sbx.Annotations[annotationExpiryAsOf], fence) {
			return nil // a later renew got there first
		}
		if sbx.Annotations == nil {
			sbx.Annotations = map[string]string{}
		}
		sbx.Annotations[annotationExpiryAsOf] = fence
		sbx.Spec.ExpireTime = expireTime(at)
		// An update: it fails if the Sandbox changed since it was read.
		err = d.c.Update(ctx, sbx)
		if !apierrors.IsConflict(err) || attempt == 9 {
			return apiErr("renew sandbox "+id, err)
		}
		select { // the cache was behind: wait for it to catch up
		case <-ch:
		case <-time.After(time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Destroy deletes the Sandbox and waits until the cluster has removed it
// and, first, its pod and Secrets (foreground deletion).
func (d *Driver) Destroy(ctx context.Context, id string) error {
	d.stopForwards(id)
	var sbx v1alpha1.Sandbox
	sbx.Name, sbx.Namespace = id, d.cfg.Namespace
	err := d.c.Delete(ctx, &sbx, client.PropagationPolicy("Foreground"))
	if err != nil && !apierrors.IsNotFound(err) {
		return apiErr("delete sandbox "+id, err)
	}
	// Its Secrets go with it once it owns them; before that (a create
	// that failed early) they are deleted here.
	for _, name := range []string{accessSecret(id), pullSecret(id)} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.cfg.Namespace}}
		if err := d.c.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
			return apiErr("delete secret "+name, err)
		}
	}
	err = d.await(ctx, id, func(*v1alpha1.Sandbox) (bool, error) {
		var s v1alpha1.Sandbox
		err := d.c.Get(ctx, types.NamespacedName{Namespace: d.cfg.Namespace, Name: id}, &s)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	return apiErr("delete sandbox "+id, err)
}

// Endpoint is the pod's address: reachable from inside the cluster and
// from its nodes.
func (d *Driver) Endpoint(ctx context.Context, id string, port int) (netip.AddrPort, error) {
	sbx, err := d.get(ctx, id)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if statusOf(sbx).Phase == driver.PhaseExited {
		return netip.AddrPort{}, errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeSandboxNotRunning, "sandbox %s is not running", id)
	}
	if port <= 0 || port > 65535 {
		return netip.AddrPort{}, errdefs.Invalid(api.CodeSandboxInvalidPort, "port %d is out of range", port)
	}
	return d.endpoint(ctx, sbx, port)
}

// endpoint is where this server reaches port of sbx's running pod.
func (d *Driver) endpoint(ctx context.Context, sbx *v1alpha1.Sandbox, port int) (netip.AddrPort, error) {
	ip, err := netip.ParseAddr(sbx.Status.PodIP)
	if err != nil || sbx.Status.PodName == "" {
		return netip.AddrPort{}, errdefs.Newf(errdefs.ErrFailedPrecondition, api.CodeSandboxNotRunning, "sandbox %s has no pod address yet", sbx.Name)
	}
	if d.cfg.Endpoints == EndpointsPortForward {
		return d.portForward(ctx, sbx.Name, sbx.Status.PodName, port)
	}
	return netip.AddrPortFrom(ip, uint16(port)), nil
}

// List reports every Sandbox of the namespace that corral manages.
func (d *Driver) List(ctx context.Context) ([]driver.Listing, error) {
	var l v1alpha1.SandboxList
	if err := d.c.List(ctx, &l, client.InNamespace(d.cfg.Namespace), client.MatchingLabels{sandbox.LabelManaged: "true"}); err != nil {
		return nil, apiErr("list sandboxes", err)
	}
	out := make([]driver.Listing, 0, len(l.Items))
	for i := range l.Items {
		s := &l.Items[i]
		lbl := userLabels(s)
		for k, v := range s.Labels {
			lbl[k] = v
		}
		out = append(out, driver.Listing{ID: s.Name, Tenant: s.Spec.Tenant, CreatedAt: s.CreationTimestamp.Time, Labels: lbl})
	}
	return out, nil
}

func userLabels(s *v1alpha1.Sandbox) map[string]string {
	m := map[string]string{}
	if a := s.Annotations[annotationLabels]; a != "" {
		_ = json.Unmarshal([]byte(a), &m)
	}
	return m
}

// apiErr classifies an API server error.
func apiErr(op string, err error) error { return apierr.Classify(op, err) }

// expireTime is at as the Sandbox's expireTime, which keeps whole
// seconds: rounded up, so the controller never deletes a sandbox before
// the time the user was promised.
func expireTime(at time.Time) *metav1.Time {
	if t := at.Truncate(time.Second); t.Before(at) {
		at = t.Add(time.Second)
	}
	return &metav1.Time{Time: at}
}

// Import reads a running sandbox back from its Sandbox resource and its
// access Secret, for a server that has no record of it.
func (d *Driver) Import(ctx context.Context, id string) (*driver.Imported, error) {
	sbx, err := d.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if statusOf(sbx).Phase != driver.PhaseRunning {
		return nil, errdefs.Newf(errdefs.ErrNotFound, api.CodeSandboxNotFound, "sandbox %s is not running", id)
	}
	var sec corev1.Secret
	if err := d.c.Get(ctx, types.NamespacedName{Namespace: d.cfg.Namespace, Name: sbx.Spec.AccessSecretName}, &sec); err != nil {
		return nil, apiErr("read the token of sandbox "+id, err)
	}
	spec := driver.Spec{
		ID: id, Tenant: sbx.Spec.Tenant, Image: driver.Image{URI: sbx.Spec.Image}, Entrypoint: sbx.Spec.Entrypoint,
		Labels: userLabels(sbx), ExecdToken: string(sec.Data[v1alpha1.TokenKey]),
	}
	if len(spec.Labels) == 0 {
		spec.Labels = nil
	}
	if q, ok := sbx.Spec.Resources.Limits[corev1.ResourceCPU]; ok {
		spec.Resources.CPUMillis = q.MilliValue()
	}
	if q, ok := sbx.Spec.Resources.Limits[corev1.ResourceMemory]; ok {
		spec.Resources.MemoryBytes = q.Value()
	}
	if t := sbx.Spec.ExpireTime; t != nil {
		spec.ExpiresAt = t.Time
	}
	return &driver.Imported{Spec: spec, CreatedAt: sbx.CreationTimestamp.Time, Handle: d.handleOf(sbx)}, nil
}

// Isolation implements driver.Isolator: a pod, as the cluster's runtime
// class and the controller's settings make it.
func (d *Driver) Isolation(*driver.Handle) string { return api.IsolationPod }

var _ driver.Isolator = (*Driver)(nil)
