// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"strconv"
	"time"
)

// The create extensions of the idle policy: after ExtensionIdleTimeout
// seconds without activity a sandbox is paused or deleted
// (ExtensionIdleAction), and ExtensionAutoResume "false" keeps a paused
// sandbox paused when a request reaches it through the server.
const (
	ExtensionIdleTimeout = "corral.dev/idle-timeout"
	ExtensionIdleAction  = "corral.dev/idle-action"
	ExtensionAutoResume  = "corral.dev/auto-resume"
)

// Idle actions.
const (
	IdlePause  = "pause"
	IdleDelete = "delete"
)

// IdlePolicy is what happens to a sandbox left alone: after Timeout (0:
// never), Action.
type IdlePolicy struct {
	Timeout time.Duration
	Action  string
}

// ParseIdle reads the idle extensions of a create, over the server's
// default; an absent one keeps the default. Timeout is a whole number of
// seconds, 0 (never) or 10 to 2592000.
func ParseIdle(ext map[string]string, def IdlePolicy) (IdlePolicy, error) {
	p := def
	if p.Action == "" {
		p.Action = IdlePause
	}
	if v, ok := ext[ExtensionIdleTimeout]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n != 0 && (n < 10 || n > 30*24*3600) {
			return p, fmt.Errorf("extensions[%s] %q: must be 0 (never) or a whole number of seconds from 10 to 2592000", ExtensionIdleTimeout, v)
		}
		p.Timeout = time.Duration(n) * time.Second
	}
	if v, ok := ext[ExtensionIdleAction]; ok {
		if v != IdlePause && v != IdleDelete {
			return p, fmt.Errorf("extensions[%s] %q: must be %s or %s", ExtensionIdleAction, v, IdlePause, IdleDelete)
		}
		p.Action = v
	}
	if v, ok := ext[ExtensionAutoResume]; ok && v != "true" && v != "false" {
		return p, fmt.Errorf("extensions[%s] %q: must be true or false", ExtensionAutoResume, v)
	}
	return p, nil
}

// AutoResume reports whether a request reaching s through the server
// resumes it when it is paused.
func (s *Sandbox) AutoResume() bool { return s.Extensions[ExtensionAutoResume] != "false" }
