// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"strings"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// State is a sandbox's lifecycle state. Only the contract's states exist.
type State int

// The states of the lifecycle contract.
const (
	StatePending State = iota + 1
	StateRunning
	StatePausing
	StatePaused
	StateResuming
	StateStopping
	StateTerminated
	StateFailed
)

// States lists every state in declaration order.
func States() []State {
	return []State{StatePending, StateRunning, StatePausing, StatePaused, StateResuming, StateStopping, StateTerminated, StateFailed}
}

func (s State) String() string {
	switch s {
	case StatePending:
		return "Pending"
	case StateRunning:
		return "Running"
	case StatePausing:
		return "Pausing"
	case StatePaused:
		return "Paused"
	case StateResuming:
		return "Resuming"
	case StateStopping:
		return "Stopping"
	case StateTerminated:
		return "Terminated"
	case StateFailed:
		return "Failed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// ParseState reads a state name, ignoring case.
func ParseState(name string) (State, error) {
	for _, s := range States() {
		if strings.EqualFold(name, s.String()) {
			return s, nil
		}
	}
	return 0, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeInvalidParameter,
		"unknown state %q (valid states: Pending, Running, Pausing, Paused, Resuming, Stopping, Terminated, Failed)", name)
}

// Terminal reports whether no transition leaves s.
func (s State) Terminal() bool { return s == StateTerminated || s == StateFailed }

// next is the lifecycle's transition table: the states reachable from
// from. Pausing and Resuming may fall back to where they came from when the
// runtime refuses the change.
func next(from State) []State {
	switch from {
	case StatePending:
		return []State{StateRunning, StateStopping, StateFailed}
	case StateRunning:
		return []State{StatePausing, StateStopping, StateTerminated, StateFailed}
	case StatePausing:
		return []State{StatePaused, StateRunning, StateStopping, StateTerminated, StateFailed}
	case StatePaused:
		return []State{StateResuming, StateStopping, StateFailed}
	case StateResuming:
		return []State{StateRunning, StatePaused, StateStopping, StateTerminated, StateFailed}
	case StateStopping:
		return []State{StateTerminated, StateFailed}
	}
	return nil
}

// CanTransition reports whether the table allows from → to.
func CanTransition(from, to State) bool {
	for _, t := range next(from) {
		if t == to {
			return true
		}
	}
	return false
}
