// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"container/heap"
	"time"
)

// deadlineHeap holds one deadline per sandbox, earliest first, with an
// index by ID so a sandbox's deadline moves or goes in O(log n).
type deadlineHeap struct {
	items []*deadline
	index map[string]*deadline
}

type deadline struct {
	id  string
	at  time.Time
	pos int
}

// set makes at sandbox id's deadline; a zero at removes it.
func (h *deadlineHeap) set(id string, at time.Time) {
	if at.IsZero() {
		h.remove(id)
		return
	}
	if d, ok := h.index[id]; ok {
		d.at = at
		heap.Fix((*deadlineItems)(h), d.pos)
		return
	}
	if h.index == nil {
		h.index = map[string]*deadline{}
	}
	d := &deadline{id: id, at: at}
	h.index[id] = d
	heap.Push((*deadlineItems)(h), d)
}

// remove drops sandbox id's deadline, if it has one.
func (h *deadlineHeap) remove(id string) {
	if d, ok := h.index[id]; ok {
		heap.Remove((*deadlineItems)(h), d.pos)
		delete(h.index, id)
	}
}

// first returns the earliest deadline and its sandbox ("" if none).
func (h *deadlineHeap) first() (string, time.Time) {
	if len(h.items) == 0 {
		return "", time.Time{}
	}
	return h.items[0].id, h.items[0].at
}

// deadlineItems is the heap.Interface of a deadlineHeap.
type deadlineItems deadlineHeap

func (h *deadlineItems) Len() int           { return len(h.items) }
func (h *deadlineItems) Less(i, j int) bool { return h.items[i].at.Before(h.items[j].at) }
func (h *deadlineItems) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].pos, h.items[j].pos = i, j
}
func (h *deadlineItems) Push(x any) {
	d := x.(*deadline)
	d.pos = len(h.items)
	h.items = append(h.items, d)
}
func (h *deadlineItems) Pop() any {
	d := h.items[len(h.items)-1]
	h.items[len(h.items)-1] = nil
	h.items = h.items[:len(h.items)-1]
	return d
}
