// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command pause is the pod sandbox ("pause") container of the test cluster
// that scripts/k8s.sh starts: nothing can be pulled here, so the script
// builds this into the image containerd's sandbox_image names. It sleeps,
// reaps the zombies it inherits, and exits on SIGTERM or SIGINT.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
