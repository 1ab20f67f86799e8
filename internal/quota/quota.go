// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package quota is the model of tenants' quotas: the limits (running
// sandboxes, all sandboxes, the cpu and memory of the running ones,
// creates a minute, snapshots, named volumes' bytes), a tenant's overrides of the server's
// defaults and their wire form, what a create or a resume needs, which
// limit it would pass, and the admission policy (reject, queue,
// pause-oldest). Queue is the fair queue of creates waiting for room:
// round-robin across tenants, first come first served within one, so one
// tenant's burst never holds another's create back for longer than a
// turn. The lifecycle Manager enforces quotas; the store keeps overrides.
package quota

import (
	"fmt"
	"strconv"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Policies: what a create or resume over a limit gets.
const (
	// PolicyReject answers 429 with Retry-After at once.
	PolicyReject = "reject"
	// PolicyQueue waits, fairly, until there is room or QueueTimeout.
	PolicyQueue = "queue"
	// PolicyPauseOldest pauses the tenant's least recently active running
	// sandboxes until there is room (limits that pausing frees: running,
	// cpu, memory); other limits are rejected.
	PolicyPauseOldest = "pause-oldest"
)

// Limits are a tenant's effective quotas; 0 is no bound.
type Limits struct {
	Running          int64
	Sandboxes        int64
	CPUMillis        int64
	MemoryBytes      int64
	CreatesPerMinute int64
	Snapshots        int64
	SnapshotBytes    int64
	// VolumeBytes bounds the sizes of the tenant's named volumes.
	VolumeBytes  int64
	Policy       string
	QueueTimeout time.Duration
}

// Overrides are a tenant's own values; a nil field takes the server's.
type Overrides struct {
	Running          *int64
	Sandboxes        *int64
	CPUMillis        *int64
	MemoryBytes      *int64
	CreatesPerMinute *int64
	Snapshots        *int64
	SnapshotBytes    *int64
	VolumeBytes      *int64
	Policy           *string
	QueueTimeout     *time.Duration
}

// Apply is l with o's values in place of the server's.
func (l Limits) Apply(o Overrides) Limits {
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&l.Running, o.Running)
	set(&l.Sandboxes, o.Sandboxes)
	set(&l.CPUMillis, o.CPUMillis)
	set(&l.MemoryBytes, o.MemoryBytes)
	set(&l.CreatesPerMinute, o.CreatesPerMinute)
	set(&l.Snapshots, o.Snapshots)
	set(&l.SnapshotBytes, o.SnapshotBytes)
	set(&l.VolumeBytes, o.VolumeBytes)
	if o.Policy != nil {
		l.Policy = *o.Policy
	}
	if o.QueueTimeout != nil {
		l.QueueTimeout = *o.QueueTimeout
	}
	return l
}

// Usage is what a tenant holds: running sandboxes (Pending, Running,
// Pausing, Resuming) with their cpu and memory, every sandbox not yet
// ended, and the creates of the last minute.
type Usage struct {
	Running, Sandboxes, CPUMillis, MemoryBytes, Creates int64
}

// Add is u plus n.
func (u Usage) Add(n Usage) Usage {
	return Usage{u.Running + n.Running, u.Sandboxes + n.Sandboxes, u.CPUMillis + n.CPUMillis, u.MemoryBytes + n.MemoryBytes, u.Creates + n.Creates}
}

// Holds reports whether a sandbox in state s counts as running.
func Holds(s sandbox.State) bool {
	switch s {
	case sandbox.StatePending, sandbox.StateRunning, sandbox.StatePausing, sandbox.StateResuming:
		return true
	}
	return false
}

// Counts reports whether a sandbox in state s counts among a tenant's
// sandboxes (every one not ended or ending).
func Counts(s sandbox.State) bool {
	return !s.Terminal() && s != sandbox.StateStopping
}

// Exceeded names the limit a request would pass.
type Exceeded struct {
	// Limit is the limit's wire name (running, sandboxes, cpu, memory,
	// createsPerMinute, or capacity for the server's own).
	Limit      string
	Max, Used  int64
	Asked      int64
	Pausable   bool
	RetryAfter time.Duration
}

// Message says what was refused, for the caller.
func (x *Exceeded) Message(tenant string) string {
	show := func(n int64) string { return strconv.FormatInt(n, 10) }
	switch x.Limit {
	case "cpu":
		show = func(n int64) string { return strconv.FormatInt(n, 10) + "m" }
	case "memory", "volumeBytes":
		show = sandbox.FormatBytes
	}
	if x.Limit == "capacity" {
		return fmt.Sprintf("this server runs at most %s sandboxes and runs %s", show(x.Max), show(x.Used))
	}
	return fmt.Sprintf("tenant %s's quota %s is %s and it uses %s; this needs %s more", tenant, x.Limit, show(x.Max), show(x.Used), show(x.Asked))
}

// Check returns the first limit need would pass on top of u, or nil.
func (l Limits) Check(u, need Usage) *Exceeded {
	for _, c := range []struct {
		name           string
		max, used, ask int64
		pausable       bool
	}{
		{"sandboxes", l.Sandboxes, u.Sandboxes, need.Sandboxes, false},
		{"running", l.Running, u.Running, need.Running, true},
		{"cpu", l.CPUMillis, u.CPUMillis, need.CPUMillis, true},
		{"memory", l.MemoryBytes, u.MemoryBytes, need.MemoryBytes, true},
		{"createsPerMinute", l.CreatesPerMinute, u.Creates, need.Creates, false},
	} {
		if c.max > 0 && c.ask > 0 && c.used+c.ask > c.max {
			return &Exceeded{Limit: c.name, Max: c.max, Used: c.used, Asked: c.ask, Pausable: c.pausable}
		}
	}
	return nil
}

// Error is a refusal: 429 QUOTA::EXCEEDED (or QUOTA::QUEUE_TIMEOUT), with
// what was passed and when to retry.
type Error struct {
	*Exceeded
	err error
}

func (e *Error) Error() string { return e.err.Error() }
func (e *Error) Unwrap() error { return e.err }

// RetrySeconds is Retry-After's value: RetryAfter rounded up, at least 1.
func (e *Error) RetrySeconds() int64 { return max(1, int64((e.RetryAfter+time.Second-1)/time.Second)) }

// Refuse is the error of a request refused for x.
func Refuse(tenant string, x *Exceeded, queued bool) *Error {
	code, msg := api.CodeQuotaExceeded, x.Message(tenant)
	if queued {
		code, msg = api.CodeQuotaQueueTimeout, "still no room when the queue's wait ended: "+msg
	}
	if x.RetryAfter <= 0 {
		x.RetryAfter = 5 * time.Second
	}
	return &Error{Exceeded: x, err: errdefs.New(errdefs.ErrResourceExhausted, code, msg)}
}

// ToWire is l as the API shows it.
func (l Limits) ToWire() api.QuotaLimits {
	return api.QuotaLimits{
		Running: l.Running, Sandboxes: l.Sandboxes, CPU: formatCPU(l.CPUMillis), Memory: formatMemory(l.MemoryBytes),
		CreatesPerMinute: l.CreatesPerMinute, Snapshots: l.Snapshots, SnapshotBytes: formatMemory(l.SnapshotBytes),
		VolumeBytes: formatMemory(l.VolumeBytes), Policy: l.Policy, QueueTimeoutSeconds: int64(l.QueueTimeout / time.Second),
	}
}

// ToWire is u as the API shows it.
func (u Usage) ToWire() api.QuotaUsage {
	return api.QuotaUsage{Running: u.Running, Sandboxes: u.Sandboxes, CPU: formatCPU(u.CPUMillis), Memory: formatMemory(u.MemoryBytes),
		CreatesLastMinute: u.Creates}
}

func formatCPU(m int64) string {
	if m == 0 {
		return ""
	}
	return strconv.FormatInt(m, 10) + "m"
}

func formatMemory(b int64) string {
	if b == 0 {
		return ""
	}
	return sandbox.FormatBytes(b)
}

// maxQueueTimeout bounds how long a queued create may wait (its HTTP
// request stays open that long).
const maxQueueTimeout = 10 * time.Minute

// FromWire reads a tenant's overrides, refusing a bad value with a 400
// that names the field.
func FromWire(in api.QuotaRequest) (Overrides, error) {
	var o Overrides
	bad := func(field, format string, args ...any) error {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidParameter, field+": "+format, args...)
	}
	for _, f := range []struct {
		name string
		in   *int64
		out  **int64
	}{
		{"running", in.Running, &o.Running}, {"sandboxes", in.Sandboxes, &o.Sandboxes},
		{"createsPerMinute", in.CreatesPerMinute, &o.CreatesPerMinute}, {"snapshots", in.Snapshots, &o.Snapshots},
	} {
		if f.in == nil {
			continue
		}
		if *f.in < 0 || *f.in > 1_000_000 {
			return o, bad(f.name, "%d: want 0 (no bound) to 1000000", *f.in)
		}
		v := *f.in
		*f.out = &v
	}
	for _, f := range []struct {
		name string
		in   *string
		out  **int64
		key  string
	}{
		{"cpu", in.CPU, &o.CPUMillis, "cpu"}, {"memory", in.Memory, &o.MemoryBytes, "memory"},
		{"snapshotBytes", in.SnapshotBytes, &o.SnapshotBytes, "memory"}, {"volumeBytes", in.VolumeBytes, &o.VolumeBytes, "memory"},
	} {
		if f.in == nil {
			continue
		}
		var v int64
		if *f.in != "" && *f.in != "0" {
			r, err := sandbox.ParseResources(map[string]string{f.key: *f.in})
			if err != nil {
				return o, bad(f.name, "%q: %v", *f.in, errdefs.Detail(err))
			}
			v = r.CPUMillis + r.MemoryBytes
		}
		*f.out = &v
	}
	if in.Policy != nil {
		switch *in.Policy {
		case PolicyReject, PolicyQueue, PolicyPauseOldest:
			p := *in.Policy
			o.Policy = &p
		default:
			return o, bad("policy", "%q: want %s, %s or %s", *in.Policy, PolicyReject, PolicyQueue, PolicyPauseOldest)
		}
	}
	if in.QueueTimeoutSeconds != nil {
		d := time.Duration(*in.QueueTimeoutSeconds) * time.Second
		if d < 0 || d > maxQueueTimeout {
			return o, bad("queueTimeoutSeconds", "%d: want 0 to %d", *in.QueueTimeoutSeconds, int64(maxQueueTimeout/time.Second))
		}
		o.QueueTimeout = &d
	}
	return o, nil
}

// Wire is o as the API shows it (nil: the server's value).
func (o Overrides) Wire() api.QuotaRequest {
	str := func(v *int64, f func(int64) string) *string {
		if v == nil {
			return nil
		}
		s := f(*v)
		if s == "" {
			s = "0"
		}
		return &s
	}
	out := api.QuotaRequest{Running: o.Running, Sandboxes: o.Sandboxes, CreatesPerMinute: o.CreatesPerMinute, Snapshots: o.Snapshots,
		CPU: str(o.CPUMillis, formatCPU), Memory: str(o.MemoryBytes, formatMemory), SnapshotBytes: str(o.SnapshotBytes, formatMemory),
		VolumeBytes: str(o.VolumeBytes, formatMemory), Policy: o.Policy}
	if o.QueueTimeout != nil {
		s := int64(*o.QueueTimeout / time.Second)
		out.QueueTimeoutSeconds = &s
	}
	return out
}

// CheckDefaults refuses server defaults that make no sense.
func (l Limits) CheckDefaults() error {
	switch l.Policy {
	case PolicyReject, PolicyQueue, PolicyPauseOldest:
	default:
		return fmt.Errorf("policy %q: want %s, %s or %s", l.Policy, PolicyReject, PolicyQueue, PolicyPauseOldest)
	}
	if l.QueueTimeout < 0 || l.QueueTimeout > maxQueueTimeout {
		return fmt.Errorf("queue timeout %v: want 0 to %v", l.QueueTimeout, maxQueueTimeout)
	}
	for _, v := range []int64{l.Running, l.Sandboxes, l.CPUMillis, l.MemoryBytes, l.CreatesPerMinute, l.Snapshots, l.SnapshotBytes, l.VolumeBytes} {
		if v < 0 {
			return fmt.Errorf("a quota is negative (%d)", v)
		}
	}
	return nil
}
