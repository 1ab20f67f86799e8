// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !windows

package client

import (
	"os"
	"os/signal"
	"syscall"
)

// notifyResize delivers the terminal's size changes (SIGWINCH) to ch.
func notifyResize(ch chan<- os.Signal) { signal.Notify(ch, syscall.SIGWINCH) }
