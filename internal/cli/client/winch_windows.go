// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import "os"

// notifyResize does nothing on Windows, which has no SIGWINCH: the
// terminal's size is sent once, when the shell starts.
func notifyResize(chan<- os.Signal) {}
