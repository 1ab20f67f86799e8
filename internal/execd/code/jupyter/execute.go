// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package jupyter

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// maxQueued bounds the iopub output held for one request that its reader
// has not taken yet; stream output past it is dropped and counted. A
// kernel can send one stream message larger than this (ipykernel sends
// what was printed in each 0.2 s): that one is kept.
const maxQueued = 64 << 20

// queue holds iopub messages for one request. push never blocks.
type queue struct {
	mu      sync.Mutex
	items   []Message
	bytes   int
	dropped int64
	notify  chan struct{}
}

func newQueue() *queue { return &queue{notify: make(chan struct{}, 1)} }

func (q *queue) push(m Message) {
	n := len(m.Content)
	q.mu.Lock()
	// One message always goes through, however large (it is in memory
	// already); the bound is on a backlog.
	if len(q.items) > 0 && q.bytes+n > maxQueued && m.Header.MsgType == "stream" {
		q.dropped += int64(n)
		q.mu.Unlock()
		return
	}
	q.items = append(q.items, m)
	q.bytes += n
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

func (q *queue) take() []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items, q.bytes = nil, 0
	return items
}

func (q *queue) droppedBytes() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}

// AckTimeout is how long an execution may wait for the kernel to take it
// (its first iopub message, status busy) before Execute gives up with
// ErrUnresponsive.
const AckTimeout = 30 * time.Second

// ErrUnresponsive is an execution the kernel did not take in AckTimeout:
// a kernel whose message loop has stopped while its process lives.
var ErrUnresponsive = errors.New("jupyter: the kernel did not take the request")

// StatusAbandoned is the Reply.Status of a request the kernel went idle
// on without replying.
const StatusAbandoned = "abandoned"

// abandonGrace is how long a reply may trail the kernel's idle status.
const abandonGrace = 2 * time.Second

// Reply is the outcome of an execution (execute_reply).
type Reply struct {
	Status         string   `json:"status"`
	ExecutionCount int      `json:"execution_count"`
	EName          string   `json:"ename"`
	EValue         string   `json:"evalue"`
	Traceback      []string `json:"traceback"`
	// Dropped counts bytes of stream output dropped because they were not
	// taken in time (see maxQueued).
	Dropped int64 `json:"-"`
}

// Execute runs code and calls on with each iopub message the execution
// produces (stream, execute_input, execute_result, display_data, error,
// clear_output, ...; status messages are not passed on), in order, as
// they arrive. It returns once the kernel has replied and gone idle. If
// on fails, or ctx ends, Execute returns that error at once and the code
// goes on running in the kernel: interrupting it is the caller's choice.
//
// stop_on_error is false: with it, ipykernel aborts whatever request
// reaches it just after an error, so whether the next, independent
// execution ran would depend on timing.
func (k *Kernel) Execute(ctx context.Context, code string, on func(Message) error) (Reply, error) {
	return k.ExecuteBatched(ctx, code, on, nil)
}

// ExecuteBatched is Execute that also calls batchEnd (if not nil) after
// each run of messages that arrived together, so a caller can flush its
// output once per run rather than once per message.
func (k *Kernel) ExecuteBatched(ctx context.Context, code string, on func(Message) error, batchEnd func() error) (Reply, error) {
	m, err := k.newMessage("execute_request", map[string]any{
		"code": code, "silent": false, "store_history": true, "user_expressions": map[string]any{},
		"allow_stdin": false, "stop_on_error": false,
	})
	if err != nil {
		return Reply{}, err
	}
	rc, q := k.route(m.Header.MsgID)
	defer k.unroute(m.Header.MsgID)
	if err := k.send(k.shell, m); err != nil {
		return Reply{}, err
	}
	var reply *Reply
	idle, acked := false, false
	ack := time.NewTimer(k.ackTimeout)
	defer ack.Stop()
	deliver := func() error {
		for _, o := range q.take() {
			acked = true
			if o.Header.MsgType == "status" {
				var st struct {
					State string `json:"execution_state"`
				}
				if json.Unmarshal(o.Content, &st) == nil && st.State == "idle" {
					idle = true
				}
				continue
			}
			if err := on(o); err != nil {
				return err
			}
		}
		if batchEnd != nil {
			return batchEnd()
		}
		return nil
	}
	// A kernel that goes idle without replying has abandoned the request:
	// ipykernel does so when an interrupt lands after execute_input but
	// before the code runs. The reply and idle travel on different
	// sockets, so the reply gets a grace period to arrive.
	var abandoned <-chan time.Time
	for !idle || reply == nil {
		if idle && reply == nil && abandoned == nil {
			t := time.NewTimer(abandonGrace)
			defer t.Stop()
			abandoned = t.C
		}
		select {
		case <-abandoned:
			return Reply{Status: StatusAbandoned, Dropped: q.droppedBytes()}, nil
		case <-q.notify:
			if err := deliver(); err != nil {
				return Reply{}, err
			}
		case r := <-rc:
			var rep Reply
			if err := json.Unmarshal(r.Content, &rep); err != nil {
				rep = Reply{Status: "error", EName: "ProtocolError", EValue: "execute_reply: " + err.Error()}
			}
			reply = &rep
		case <-k.exited:
			// What the kernel printed before it died still goes out.
			if err := deliver(); err != nil {
				return Reply{}, err
			}
			return Reply{Dropped: q.droppedBytes()}, ErrDied
		case <-ack.C:
			if !acked && reply == nil {
				return Reply{}, ErrUnresponsive
			}
		case <-ctx.Done():
			return Reply{}, ctx.Err()
		}
	}
	reply.Dropped = q.droppedBytes()
	return *reply, nil
}
