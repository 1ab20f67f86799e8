// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package benchsrv

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
)

// Execd is a `corral execd` process on loopback, without a token.
type Execd struct {
	Cmd *exec.Cmd
	// URL is its base URL.
	URL string
}

// StartExecd runs bin's execd with its state in stateDir and returns once
// it serves.
func StartExecd(bin, stateDir string) (*Execd, error) {
	cmd := exec.Command(bin, "execd", "--listen", "127.0.0.1:0", "--state-dir", stateDir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var addr string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		var l struct{ Msg, Listen string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "execd serving" {
			addr = l.Listen
			break
		}
	}
	if addr == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, errors.New("execd did not start")
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	return &Execd{Cmd: cmd, URL: "http://" + addr}, nil
}

// Close stops execd (SIGINT, so it ends what it started) and waits.
func (e *Execd) Close() {
	_ = e.Cmd.Process.Signal(os.Interrupt)
	_ = e.Cmd.Wait()
}
