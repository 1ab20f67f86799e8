// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"sync"

	"github.com/corral-dev/corral/internal/sandbox"
)

// maxCachedBodies bounds the bodies kept: past it the cache starts over
// (a sandbox removed leaves its body here until then).
const maxCachedBodies = 8192

// bodyCache keeps each sandbox's encoded GET answer with the record it
// was made from. Records are shared and never changed in place
// (lifecycle.Manager.Shared), so a body is current exactly while the
// manager hands out the same record: a change replaces the record and
// the next GET encodes afresh. Encoding was a fifth of the server's CPU
// per GET.
type bodyCache struct {
	mu     sync.RWMutex
	bodies map[string]cachedBody
}

type cachedBody struct {
	sb   *sandbox.Sandbox
	body []byte
}

// get returns the body made from sb, if it is kept.
func (c *bodyCache) get(sb *sandbox.Sandbox) ([]byte, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	b, ok := c.bodies[sb.ID]
	if !ok || b.sb != sb {
		return nil, false
	}
	return b.body, true
}

// put keeps body as the one made from sb.
func (c *bodyCache) put(sb *sandbox.Sandbox, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bodies == nil || len(c.bodies) >= maxCachedBodies {
		c.bodies = map[string]cachedBody{}
	}
	c.bodies[sb.ID] = cachedBody{sb: sb, body: body}
}
