// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package records keeps the lifecycle's sandbox records in the cluster,
// so that `corral serve --runtime kubernetes` holds no sandbox state of its
// own and several replicas serve the same sandboxes: each record (with its
// access tokens and its recent events) is a Secret, every write is
// conditional on the revision it was computed from, and an informer feeds
// every server each change. Idempotency keys are Secrets named after the
// key, so two servers cannot bind one key twice.
package records

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/kube/apierr"
	"github.com/corral-dev/corral/internal/kube/kubeconfig"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Labels of the Secrets this package writes.
const (
	LabelRecord      = "corral.dev/record"
	LabelIdempotency = "corral.dev/idempotency"
)

// Data keys of a record Secret.
const (
	keyRecord = "record"
	keyEvents = "events"
)

// MaxEvents is how many of a sandbox's most recent events its record keeps.
const MaxEvents = 64

// Config configures Records.
type Config struct {
	REST      *rest.Config
	Namespace string
	// ServerID separates the records of servers sharing a namespace; the
	// replicas of one server share it.
	ServerID string
	Logger   *slog.Logger
}

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// Records is a lifecycle.SharedRecords in a namespace's Secrets, with the
// published event log (lifecycle.EventLog) and the admission claims
// (lifecycle.SharedAdmission) its replicas share.
type Records struct {
	*secrets
	log    *eventLog
	claims *secrets
}

// New connects to the cluster and fills the caches before it returns.
func New(ctx context.Context, cfg Config) (*Records, error) {
	s, err := openSecrets(ctx, cfg, LabelRecord)
	if err != nil {
		return nil, err
	}
	l, err := openSecrets(ctx, cfg, LabelEventLog)
	if err != nil {
		s.Close()
		return nil, err
	}
	c, err := openSecrets(ctx, cfg, LabelClaims)
	if err != nil {
		s.Close()
		l.Close()
		return nil, err
	}
	r := &Records{secrets: s, log: &eventLog{secrets: l}, claims: c}
	if err := r.recoverPublished(ctx); err != nil {
		r.Close()
		return nil, fmt.Errorf("records: the published log: %w", err)
	}
	return r, nil
}

// recoverPublished adds to the published log the events of records (of a
// published type, still in a record's kept events, and no older than the
// log's oldest) that it misses: a replica that wrote a record and died
// before its event reached the log leaves one. Each goes under its ref,
// once, at the log's end (with its own time).
func (r *Records) recoverPublished(ctx context.Context) error {
	_, segs, err := r.log.cached(ctx, 0)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	var oldest time.Time
	for i, sg := range segs {
		for j, ev := range sg.Events {
			if ev.Ref != "" {
				have[ev.Ref] = true
			}
			if i == 0 && j == 0 {
				oldest = ev.At
			}
		}
	}
	items, err := r.list(ctx)
	if err != nil {
		return err
	}
	var missing []logEvent
	for i := range items {
		var evs []sandbox.Event
		if json.Unmarshal(items[i].Data[keyEvents], &evs) != nil {
			continue
		}
		for _, ev := range evs {
			ref := eventRef(ev.SandboxID, ev.Seq)
			if ev.Kind == "" || have[ref] || ev.At.Before(oldest) {
				continue
			}
			missing = append(missing, logEvent{Event: ev, Ref: ref})
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.SortFunc(missing, func(a, b logEvent) int { return a.At.Compare(b.At) })
	r.cfg.logger().InfoContext(ctx, "events a record holds were missing from the published log; added", "events", len(missing))
	return r.log.append(ctx, missing)
}

// Close stops the caches.
func (r *Records) Close() error {
	r.claims.Close()
	r.log.Close()
	return r.secrets.Close()
}

// publish adds a record change's event to the published log when it has a
// type there, under ref (its place in the record's events). The record is
// written already: a failure is logged, not returned (the change
// happened); a replica starting adds what its record holds and the log
// misses (recoverPublished).
func (r *Records) publish(ctx context.Context, ev *sandbox.Event, ref string) {
	if ev == nil || ev.Kind == "" {
		return
	}
	if err := r.log.append(ctx, []logEvent{{Event: *ev, Ref: ref}}); err != nil {
		r.cfg.logger().WarnContext(ctx, "an event was not added to the published log", "sandbox_id", ev.SandboxID, "type", ev.Kind, "err", err)
	}
}

// AppendAudit adds the published ones of evs to the log
// (lifecycle.AuditLog); the others, kept only in a sandbox's own log, are
// not kept in the cluster.
func (r *Records) AppendAudit(ctx context.Context, evs []sandbox.Event) error {
	les := make([]logEvent, len(evs))
	for i := range evs {
		les[i].Event = evs[i]
	}
	return r.log.append(ctx, les)
}

// TenantEvents reads a tenant's published events (lifecycle.EventLog).
func (r *Records) TenantEvents(ctx context.Context, q sandbox.EventQuery) ([]sandbox.Event, error) {
	return r.log.TenantEvents(ctx, q)
}

// LastSeq is the newest published position this server has read.
func (r *Records) LastSeq(ctx context.Context) (int64, error) { return r.log.LastSeq(ctx) }

// FollowEvents calls changed after every change to the published log,
// by any server, until ctx ends.
func (r *Records) FollowEvents(ctx context.Context, changed func()) error {
	return r.log.followEvents(ctx, changed)
}

// secrets is one kind of this server's Secrets (those labelled kind):
// a cache and its informer, and a client that reads past them.
type secrets struct {
	cfg   Config
	ours  labels.Set
	c     client.Client // writes, and fresh reads where a stale one would do harm
	cache cache.Cache
	inf   cache.Informer
	stop  func()
	// closed ends the handlers of follow.
	closed chan struct{}
}

// openSecrets starts the cache of kind's Secrets and waits for it to fill.
func openSecrets(ctx context.Context, cfg Config, kind string) (*secrets, error) {
	if cfg.REST == nil || cfg.Namespace == "" || cfg.ServerID == "" {
		return nil, errors.New("records: REST, Namespace and ServerID are required")
	}
	ours := labels.Set{sandbox.LabelManaged: "true", sandbox.LabelServer: cfg.ServerID}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	ca, err := cache.New(cfg.REST, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{cfg.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Merge(ours, labels.Set{kind: "true"}))},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	c, err := client.New(cfg.REST, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	inf, err := ca.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	stop, err := kubeconfig.StartCache(ctx, ca, nil,
		fmt.Sprintf("records: could not list Secrets in namespace %s (may this server list and watch them?)", cfg.Namespace))
	if err != nil {
		return nil, err
	}
	return &secrets{cfg: cfg, ours: ours, c: c, cache: ca, inf: inf, stop: stop, closed: make(chan struct{})}, nil
}

// Close removes the handlers of follow and stops the cache.
func (s *secrets) Close() error {
	close(s.closed)
	s.stop()
	return nil
}

// follow calls changed with every Secret added or updated and deleted with
// every one removed, in order, until ctx ends or Close.
func (s *secrets) follow(ctx context.Context, changed, deleted func(*corev1.Secret)) error {
	take := func(f func(*corev1.Secret)) func(any) {
		return func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if sec, ok := obj.(*corev1.Secret); ok {
				f(sec)
			}
		}
	}
	reg, err := s.inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    take(changed),
		UpdateFunc: func(_, obj any) { take(changed)(obj) },
		DeleteFunc: take(deleted),
	})
	if err != nil {
		return fmt.Errorf("records: %w", err)
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-s.closed:
		}
		_ = s.inf.RemoveEventHandler(reg)
	}()
	return nil
}

// recordName is the Secret holding sandbox id's record.
func recordName(id string) string { return "corral-" + id + "-record" }

// idemName is the Secret binding a tenant's idempotency key on this
// server: named after a digest of the three, so creating it is the atomic
// claim, and servers sharing the namespace do not collide.
func (r *Records) idemName(tenant, key string) string {
	return "corral-idem-" + digest(r.cfg.ServerID, tenant, key)
}

// digest is 40 hex digits of the SHA-256 of parts, kept apart.
func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:20])
}

// doc is a record's stored form.
type doc struct {
	ID            string            `json:"id"`
	Tenant        string            `json:"tenant"`
	State         string            `json:"state"`
	Reason        string            `json:"reason,omitempty"`
	Message       string            `json:"message,omitempty"`
	TransitionAt  time.Time         `json:"lastTransitionAt"`
	Image         string            `json:"image,omitempty"`
	SnapshotID    string            `json:"snapshotId,omitempty"`
	Platform      *sandbox.Platform `json:"platform,omitempty"`
	Entrypoint    []string          `json:"entrypoint,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	Resources     map[string]string `json:"resources,omitempty"`
	Extensions    map[string]string `json:"extensions,omitempty"`
	NetworkPolicy json.RawMessage   `json:"networkPolicy,omitempty"`
	CreatedAt     time.Time         `json:"createdAt"`
	ExpiresAt     *time.Time        `json:"expiresAt,omitempty"`
	UpdatedAt     time.Time         `json:"updatedAt"`
	Driver        string            `json:"driver"`
	Handle        json.RawMessage   `json:"handle,omitempty"`
	ExecdToken    string            `json:"execdToken"`
	EgressToken   string            `json:"egressToken"`
}

func encode(sb *sandbox.Sandbox) ([]byte, error) {
	d := doc{
		ID: sb.ID, Tenant: sb.Tenant, State: sb.Status.State.String(), Reason: sb.Status.Reason, Message: sb.Status.Message,
		TransitionAt: sb.Status.LastTransitionAt, SnapshotID: sb.SnapshotID, Platform: sb.Platform, Entrypoint: sb.Entrypoint,
		Metadata: sb.Metadata, Resources: sb.Resources.Map(), Extensions: sb.Extensions, NetworkPolicy: sb.NetworkPolicy,
		CreatedAt: sb.CreatedAt, UpdatedAt: sb.UpdatedAt, Driver: sb.Driver, Handle: sb.Handle,
		ExecdToken: string(sb.ExecdToken), EgressToken: string(sb.EgressToken),
	}
	if sb.Image != nil {
		d.Image = sb.Image.URI
	}
	if !sb.ExpiresAt.IsZero() {
		t := sb.ExpiresAt
		d.ExpiresAt = &t
	}
	return json.Marshal(d)
}

// decode reads a record Secret back; Version is its resourceVersion.
func decode(s *corev1.Secret) (*sandbox.Sandbox, error) {
	var d doc
	if err := json.Unmarshal(s.Data[keyRecord], &d); err != nil {
		return nil, fmt.Errorf("record %s: %w", s.Name, err)
	}
	state, err := sandbox.ParseState(d.State)
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", s.Name, err)
	}
	res, err := sandbox.ParseResources(d.Resources)
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", s.Name, err)
	}
	sb := &sandbox.Sandbox{
		ID: d.ID, Tenant: d.Tenant, SnapshotID: d.SnapshotID, Platform: d.Platform, Entrypoint: d.Entrypoint,
		Metadata: d.Metadata, Resources: res, Extensions: d.Extensions, NetworkPolicy: d.NetworkPolicy,
		Status:    sandbox.Status{State: state, Reason: d.Reason, Message: d.Message, LastTransitionAt: d.TransitionAt},
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt, Driver: d.Driver, Handle: d.Handle,
		ExecdToken: sandbox.Token(d.ExecdToken), EgressToken: sandbox.Token(d.EgressToken), Version: s.ResourceVersion,
	}
	if d.Image != "" {
		sb.Image = &sandbox.Image{URI: d.Image}
	}
	if d.ExpiresAt != nil {
		sb.ExpiresAt = *d.ExpiresAt
	}
	return sb, nil
}

// appendEvent returns events (JSON) with ev added, numbered after the
// last one, keeping the newest MaxEvents, and ev's number.
func appendEvent(events []byte, ev *sandbox.Event) ([]byte, int64, error) {
	var evs []sandbox.Event
	if len(events) > 0 {
		if err := json.Unmarshal(events, &evs); err != nil {
			return nil, 0, err
		}
	}
	var seq int64
	if ev != nil {
		e := *ev
		e.Seq = 1
		if n := len(evs); n > 0 {
			e.Seq = evs[n-1].Seq + 1
		}
		seq = e.Seq
		evs = append(evs, e)
		if len(evs) > MaxEvents {
			evs = evs[len(evs)-MaxEvents:]
		}
	}
	b, err := json.Marshal(evs)
	return b, seq, err
}

// eventRef names event seq of sandbox id's record in the published log.
func eventRef(id string, seq int64) string { return id + "/" + strconv.FormatInt(seq, 10) }

// meta names a Secret of kind (its label) of this server's.
func (s *secrets) meta(name, kind string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: s.cfg.Namespace, Labels: labels.Merge(s.ours, labels.Set{kind: "true"})}
}

// InsertSandbox creates sb's record Secret, after claiming idem's key.
func (r *Records) InsertSandbox(ctx context.Context, sb *sandbox.Sandbox, idem *sandbox.Idempotency, ev *sandbox.Event) (*sandbox.Idempotency, error) {
	rec, err := encode(sb)
	if err != nil {
		return nil, err
	}
	events, seq, err := appendEvent(nil, ev)
	if err != nil {
		return nil, err
	}
	if idem != nil {
		if prev, err := r.claim(ctx, idem); err != nil {
			return prev, err
		}
	}
	s := &corev1.Secret{ObjectMeta: r.meta(recordName(sb.ID), LabelRecord), Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{keyRecord: rec, keyEvents: events}}
	if err := r.c.Create(ctx, s); err != nil {
		if idem != nil {
			_ = r.ReleaseIdempotency(context.WithoutCancel(ctx), idem.Tenant, idem.Key, sb.ID)
		}
		return nil, apiErr("store the record of sandbox "+sb.ID, err)
	}
	sb.Version = s.ResourceVersion
	r.publish(ctx, ev, eventRef(sb.ID, seq))
	return nil, nil
}

// claim creates idem's Secret; if the key is taken it returns the binding
// with ErrAlreadyExists.
func (r *Records) claim(ctx context.Context, idem *sandbox.Idempotency) (*sandbox.Idempotency, error) {
	b, err := json.Marshal(idem)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		s := &corev1.Secret{ObjectMeta: r.meta(r.idemName(idem.Tenant, idem.Key), LabelIdempotency), Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{"binding": b}}
		err = r.c.Create(ctx, s)
		if !apierrors.IsAlreadyExists(err) {
			return nil, apiErr("store an idempotency key", err)
		}
		prev, lerr := r.LookupIdempotency(ctx, idem.Tenant, idem.Key)
		if errors.Is(lerr, errdefs.ErrNotFound) && attempt < 3 {
			continue // released between the two: claim again
		}
		if lerr != nil {
			return nil, lerr
		}
		return prev, fmt.Errorf("idempotency key %q: %w", idem.Key, errdefs.ErrAlreadyExists)
	}
}

// UpdateSandbox rewrites sb's record if it is still at sb.Version.
func (r *Records) UpdateSandbox(ctx context.Context, sb *sandbox.Sandbox, ev *sandbox.Event) error {
	base, err := r.revision(ctx, sb.ID, sb.Version)
	if err != nil {
		return err
	}
	rec, err := encode(sb)
	if err != nil {
		return err
	}
	events, seq, err := appendEvent(base.Data[keyEvents], ev)
	if err != nil {
		return fmt.Errorf("record %s: events: %w", sb.ID, err)
	}
	next := base.DeepCopy()
	next.Data = map[string][]byte{keyRecord: rec, keyEvents: events}
	if err := r.c.Update(ctx, next); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("sandbox %s: %w", sb.ID, sandbox.ErrConflict)
		}
		return apiErr("update the record of sandbox "+sb.ID, err)
	}
	sb.Version = next.ResourceVersion
	r.publish(ctx, ev, eventRef(sb.ID, seq))
	return nil
}

// revision returns the record Secret of id at version: from the cache when
// it has it, else from the API server (the cache may lag this server's own
// last write). Another version is a conflict; an empty one reads the
// newest from the API server.
func (r *Records) revision(ctx context.Context, id, version string) (*corev1.Secret, error) {
	var s corev1.Secret
	key := types.NamespacedName{Namespace: r.cfg.Namespace, Name: recordName(id)}
	if version != "" {
		if err := r.cache.Get(ctx, key, &s); err == nil && s.ResourceVersion == version {
			return &s, nil
		}
	}
	if err := r.getOurs(ctx, key.Name, &s); err != nil {
		return nil, apiErr("read the record of sandbox "+id, err)
	}
	if version != "" && s.ResourceVersion != version {
		return nil, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrConflict)
	}
	return &s, nil
}

// DeleteSandbox removes id's record; its events go with it.
func (r *Records) DeleteSandbox(ctx context.Context, id string, ev *sandbox.Event) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: recordName(id), Namespace: r.cfg.Namespace}}
	err := r.c.Delete(ctx, s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return apiErr("delete the record of sandbox "+id, err)
	}
	r.publish(ctx, ev, "")
	return nil
}

// LoadSandboxes returns every record, oldest first.
func (r *Records) LoadSandboxes(ctx context.Context) ([]*sandbox.Sandbox, error) {
	items, err := r.list(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*sandbox.Sandbox, 0, len(items))
	for i := range items {
		sb, err := decode(&items[i])
		if err != nil {
			// One unreadable Secret must not keep every replica from
			// starting; it is reported and left alone.
			r.cfg.logger().WarnContext(ctx, "an unreadable sandbox record is skipped", "secret", items[i].Name, "err", err)
			continue
		}
		out = append(out, sb)
	}
	slices.SortFunc(out, func(a, b *sandbox.Sandbox) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// GetSandbox reads id's newest record from the API server.
func (r *Records) GetSandbox(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	s, err := r.revision(ctx, id, "")
	if err != nil {
		return nil, err
	}
	return decode(s)
}

// Events returns the kept events of id after seq, oldest first.
func (r *Records) Events(ctx context.Context, id string, after int64, limit int, typePrefix string) ([]sandbox.Event, error) {
	s, err := r.revision(ctx, id, "")
	if err != nil {
		return nil, err
	}
	var evs []sandbox.Event
	if err := json.Unmarshal(s.Data[keyEvents], &evs); err != nil {
		return nil, fmt.Errorf("record %s: events: %w", id, err)
	}
	out := []sandbox.Event{}
	for _, ev := range evs {
		if ev.Seq > after && strings.HasPrefix(ev.Type, typePrefix) && (limit <= 0 || len(out) < limit) {
			out = append(out, ev)
		}
	}
	return out, nil
}

// LookupIdempotency returns a tenant's key binding; ErrNotFound if none.
func (r *Records) LookupIdempotency(ctx context.Context, tenant, key string) (*sandbox.Idempotency, error) {
	var s corev1.Secret
	if err := r.getOurs(ctx, r.idemName(tenant, key), &s); err != nil {
		return nil, apiErr("read an idempotency key", err)
	}
	var idem sandbox.Idempotency
	if err := json.Unmarshal(s.Data["binding"], &idem); err != nil {
		return nil, fmt.Errorf("idempotency key: %w", err)
	}
	if idem.Tenant != tenant || idem.Key != key {
		return nil, fmt.Errorf("idempotency key: %w", errdefs.ErrNotFound)
	}
	return &idem, nil
}

// ReleaseIdempotency forgets a key if it is still bound to sandboxID.
func (r *Records) ReleaseIdempotency(ctx context.Context, tenant, key, sandboxID string) error {
	var s corev1.Secret
	err := r.getOurs(ctx, r.idemName(tenant, key), &s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return apiErr("read an idempotency key", err)
	}
	var idem sandbox.Idempotency
	if json.Unmarshal(s.Data["binding"], &idem) != nil || idem.Tenant != tenant || idem.Key != key || idem.SandboxID != sandboxID {
		return nil
	}
	// Only the binding just read: a new claim made meanwhile stays.
	return r.deleteIdem(ctx, &s)
}

// deleteIdem deletes the idempotency Secret s, if it is still the
// revision read.
func (r *Records) deleteIdem(ctx context.Context, s *corev1.Secret) error {
	pre := client.Preconditions{UID: &s.UID, ResourceVersion: &s.ResourceVersion}
	if err := r.c.Delete(ctx, s, pre); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return apiErr("delete an idempotency key", err)
	}
	return nil
}

// PurgeIdempotency forgets keys bound before before.
func (r *Records) PurgeIdempotency(ctx context.Context, before time.Time) error {
	var l corev1.SecretList
	sel := labels.Merge(r.ours, labels.Set{LabelIdempotency: "true"})
	if err := r.c.List(ctx, &l, client.InNamespace(r.cfg.Namespace), client.MatchingLabels(sel)); err != nil {
		return apiErr("list idempotency keys", err)
	}
	for i := range l.Items {
		var idem sandbox.Idempotency
		if json.Unmarshal(l.Items[i].Data["binding"], &idem) == nil && !idem.CreatedAt.Before(before) {
			continue
		}
		if err := r.deleteIdem(ctx, &l.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

// Follow calls changed with every record written and deleted with the ID
// of every record removed, until ctx ends.
func (r *Records) Follow(ctx context.Context, changed func(*sandbox.Sandbox), deleted func(id string)) error {
	return r.follow(ctx, func(s *corev1.Secret) {
		sb, err := decode(s)
		if err != nil {
			r.cfg.logger().WarnContext(ctx, "an unreadable sandbox record is skipped", "secret", s.Name, "err", err)
			return
		}
		changed(sb)
	}, func(s *corev1.Secret) {
		if id, ok := strings.CutSuffix(strings.TrimPrefix(s.Name, "corral-"), "-record"); ok {
			deleted(id)
		}
	})
}

// apiErr classifies an API server error.
func apiErr(op string, err error) error { return apierr.Classify(op, err) }
