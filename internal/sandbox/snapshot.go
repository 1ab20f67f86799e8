// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// SnapshotState is a snapshot's lifecycle state.
type SnapshotState int

// The snapshot states of the contract.
const (
	SnapshotCreating SnapshotState = iota + 1
	SnapshotReady
	SnapshotFailed
	SnapshotDeleting
)

func (s SnapshotState) String() string {
	switch s {
	case SnapshotCreating:
		return "Creating"
	case SnapshotReady:
		return "Ready"
	case SnapshotFailed:
		return "Failed"
	case SnapshotDeleting:
		return "Deleting"
	}
	return fmt.Sprintf("SnapshotState(%d)", int(s))
}

// ParseSnapshotState reads a snapshot state name, ignoring case.
func ParseSnapshotState(name string) (SnapshotState, error) {
	for _, s := range []SnapshotState{SnapshotCreating, SnapshotReady, SnapshotFailed, SnapshotDeleting} {
		if strings.EqualFold(name, s.String()) {
			return s, nil
		}
	}
	return 0, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidParameter,
		"unknown snapshot state %q (valid states: Creating, Ready, Failed, Deleting)", name)
}

// Snapshot reasons.
const (
	ReasonSnapshotAccepted    = "snapshot_accepted"
	ReasonSnapshotReady       = "snapshot_ready"
	ReasonSnapshotFailed      = "snapshot_capture_failed"
	ReasonSnapshotInterrupted = "interrupted_by_restart"
)

// Snapshot is the record of one snapshot.
type Snapshot struct {
	ID        string
	Tenant    string
	SandboxID string
	Name      string
	State     SnapshotState
	Reason    string
	Message   string
	// LastTransitionAt is when State last changed.
	LastTransitionAt time.Time
	CreatedAt        time.Time
	Driver           string
	// Ref is the driver's JSON-encoded snapshot reference once captured.
	Ref json.RawMessage
}

// Clone returns a deep copy.
func (s *Snapshot) Clone() *Snapshot {
	c := *s
	c.Ref = append(json.RawMessage(nil), s.Ref...)
	return &c
}
