// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package testutil

import (
	"strings"
	"sync"
)

// LockedBuffer collects output written from several goroutines (a
// process's stderr, a logger).
type LockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
