// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package records

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/corral-dev/corral/internal/sandbox"
)

// LabelEventLog marks the Secrets holding the published event log.
const LabelEventLog = "corral.dev/eventlog"

// labelSegment is a log segment's number.
const labelSegment = "corral.dev/segment"

// The published event log is a chain of segments, each a Secret holding
// up to SegmentEvents events. Event n of segment k has position
// k*SegmentEvents+n+1, given in the same compare-and-swap write that adds
// it, so a position is readable only once every lower one of its segment
// is. A segment is sealed (by count, or by a write that marks it when the
// next events would not fit its bytes) before the next one is made, and
// nothing is added to a sealed segment: the watch that fills every
// server's cache delivers a segment's last change before the next
// segment's first, so a reader following after position N misses
// nothing. The newest KeepSegments segments are kept.
const (
	SegmentEvents = 256
	segmentBytes  = 512 << 10
	KeepSegments  = 16
)

// segment is a segment's stored form.
type segment struct {
	Sealed bool       `json:"sealed,omitempty"`
	Events []logEvent `json:"events"`
}

// logEvent is an event in the log; Ref names a record change's event
// (sandbox ID and its number in the record), so that it is added once.
type logEvent struct {
	sandbox.Event
	Ref string `json:"ref,omitempty"`
}

// eventLog is the published event log of one server (its replicas share
// it).
type eventLog struct {
	*secrets
	mu sync.Mutex // orders this replica's appends (others are refused by the swap)
}

func (l *eventLog) segmentName(k int64) string {
	return "corral-events-" + digest(l.cfg.ServerID)[:16] + "-" + strconv.FormatInt(k, 10)
}

// numbers are the numbers of the log's segments in the cache, oldest
// first (read from their labels: nothing is decoded).
func (l *eventLog) numbers(ctx context.Context) ([]int64, error) {
	items, err := l.list(ctx)
	if err != nil {
		return nil, err
	}
	ks := make([]int64, len(items))
	for i := range items {
		ks[i] = int64(segNumber(&items[i]))
	}
	slices.Sort(ks)
	return ks, nil
}

// cached is the log's segments in the cache numbered from on, oldest
// first, with their numbers; the older ones are not decoded.
func (l *eventLog) cached(ctx context.Context, from int64) ([]int64, []segment, error) {
	items, err := l.list(ctx)
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(items, func(a, b corev1.Secret) int { return segNumber(&a) - segNumber(&b) })
	ks := make([]int64, 0, len(items))
	segs := make([]segment, 0, len(items))
	for i := range items {
		if int64(segNumber(&items[i])) < from {
			continue
		}
		var sg segment
		if err := json.Unmarshal(items[i].Data["segment"], &sg); err != nil {
			l.cfg.logger().WarnContext(ctx, "an unreadable event log segment is skipped", "secret", items[i].Name, "err", err)
			continue
		}
		ks = append(ks, int64(segNumber(&items[i])))
		segs = append(segs, sg)
	}
	return ks, segs, nil
}

func segNumber(s *corev1.Secret) int {
	n, _ := strconv.Atoi(s.Labels[labelSegment])
	return n
}

// append adds the events (those with a Kind) to the log, numbering them;
// one whose Ref the segment it would join holds already is left out.
func (l *eventLog) append(ctx context.Context, evs []logEvent) error {
	var pub []logEvent
	for _, ev := range evs {
		if ev.Kind != "" {
			pub = append(pub, ev)
		}
	}
	if len(pub) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ks, err := l.numbers(ctx)
	if err != nil {
		return err
	}
	var k int64
	if len(ks) > 0 {
		k = ks[len(ks)-1]
	}
	for len(pub) > 0 {
		added := 0
		err := l.mutateSegment(ctx, k, func(sg *segment) bool {
			added = 0
			if sg.Sealed {
				return false
			}
			size := 0
			refs := map[string]bool{}
			for _, ev := range sg.Events {
				size += eventSize(&ev.Event)
				if ev.Ref != "" {
					refs[ev.Ref] = true
				}
			}
			for _, ev := range pub {
				if ev.Ref != "" && refs[ev.Ref] {
					added++ // there already
					continue
				}
				if len(sg.Events) == SegmentEvents || (len(sg.Events) > 0 && size+eventSize(&ev.Event) > segmentBytes) {
					break
				}
				ev.Seq = k*SegmentEvents + int64(len(sg.Events)) + 1
				sg.Events = append(sg.Events, ev)
				size += eventSize(&ev.Event)
				added++
			}
			if added < len(pub) {
				// What is left goes to the next segment; none is added here after.
				sg.Sealed = true
			}
			return true
		})
		if err != nil {
			return err
		}
		pub = pub[added:]
		if len(pub) > 0 {
			k++
			if k >= KeepSegments {
				l.trim(ctx, k-KeepSegments)
			}
		}
	}
	return nil
}

// mutateSegment changes segment k by compare and swap; f returns whether
// to write.
func (l *eventLog) mutateSegment(ctx context.Context, k int64, f func(*segment) bool) error {
	name := l.segmentName(k)
	return l.mutate(ctx, name, LabelEventLog, labels.Set{labelSegment: strconv.FormatInt(k, 10)}, func(data map[string][]byte) (map[string][]byte, error) {
		var sg segment
		if data != nil {
			if err := json.Unmarshal(data["segment"], &sg); err != nil {
				return nil, fmt.Errorf("event log segment %s: %w", name, err)
			}
		}
		if !f(&sg) {
			return nil, errNoChange
		}
		b, err := json.Marshal(sg)
		if err != nil {
			return nil, err
		}
		return map[string][]byte{"segment": b}, nil
	})
}

// trim deletes the segments up to k.
func (l *eventLog) trim(ctx context.Context, k int64) {
	ks, err := l.numbers(ctx)
	if err != nil {
		return
	}
	for _, n := range ks {
		if n <= k {
			_ = l.mutate(ctx, l.segmentName(n), LabelEventLog, nil, func(map[string][]byte) (map[string][]byte, error) { return nil, errRemove })
		}
	}
}

// eventSize is about what ev takes in a segment.
func eventSize(ev *sandbox.Event) int {
	n := 160 + len(ev.Tenant) + len(ev.SandboxID) + len(ev.Type) + len(ev.State) + len(ev.Reason) + len(ev.Message) + len(ev.Detail) + len(ev.Kind)
	for k, v := range ev.Metadata {
		n += len(k) + len(v) + 6
	}
	return n
}

// TenantEvents returns a tenant's published events after q.After, oldest
// first, read from the cache (lifecycle.EventLog).
func (l *eventLog) TenantEvents(ctx context.Context, q sandbox.EventQuery) ([]sandbox.Event, error) {
	// Segment k holds positions up to (k+1)*SegmentEvents.
	_, segs, err := l.cached(ctx, q.After/SegmentEvents)
	if err != nil {
		return nil, err
	}
	out := []sandbox.Event{}
	for _, sg := range segs {
		for _, ev := range sg.Events {
			if ev.Seq <= q.After || ev.Tenant != q.Tenant || (q.SandboxID != "" && ev.SandboxID != q.SandboxID) ||
				(len(q.Kinds) > 0 && !slices.Contains(q.Kinds, ev.Kind)) {
				continue
			}
			out = append(out, ev.Event)
			if q.Limit > 0 && len(out) == q.Limit {
				return out, nil
			}
		}
	}
	return out, nil
}

// LastSeq is the newest position in the cache: every event at or below it
// is readable from the cache too.
func (l *eventLog) LastSeq(ctx context.Context) (int64, error) {
	ks, err := l.numbers(ctx)
	if err != nil || len(ks) == 0 {
		return 0, err
	}
	head := ks[len(ks)-1]
	_, segs, err := l.cached(ctx, head)
	if err != nil {
		return 0, err
	}
	if n := len(segs); n > 0 {
		if evs := segs[n-1].Events; len(evs) > 0 {
			return evs[len(evs)-1].Seq, nil
		}
	}
	return head * SegmentEvents, nil
}

// followEvents calls changed after each change to the log (by any
// server), until ctx ends.
func (l *eventLog) followEvents(ctx context.Context, changed func()) error {
	f := func(*corev1.Secret) { changed() }
	return l.follow(ctx, f, f)
}
