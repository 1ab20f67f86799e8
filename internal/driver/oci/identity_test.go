// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/corral-dev/corral/errdefs"
)

// A PID 1 that runs another program than the server's corral binary (one
// a volume or the image put at /.corral/corral) is refused as the
// tenant's doing; one that runs the binary itself passes.
func TestCheckInitKnowsCorralsBinary(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{cfg: Config{CorralBinary: self}}
	for _, tc := range []struct {
		name string
		cmd  *exec.Cmd
		want error
	}{
		{"corral's binary", sleeper(self), nil},
		{"another program", exec.Command("sleep", "30"), errdefs.ErrInvalidArgument},
	} {
		if err := tc.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		err := d.checkInit(tc.cmd.Process.Pid)
		_ = tc.cmd.Process.Kill()
		_ = tc.cmd.Wait()
		if (tc.want == nil) != (err == nil) || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: checkInit = %v, want %v", tc.name, err, tc.want)
		}
	}
}

// sleeper runs this test binary as a process that waits (TestSleepHelper).
func sleeper(self string) *exec.Cmd {
	cmd := exec.Command(self, "-test.run=^TestSleepHelper$", "-test.timeout=30s")
	cmd.Env = append(os.Environ(), "CORRAL_TEST_SLEEP_HELPER=1")
	return cmd
}

// TestSleepHelper is a process for TestCheckInitKnowsCorralsBinary to
// look at; it does nothing in an ordinary run.
func TestSleepHelper(t *testing.T) {
	if os.Getenv("CORRAL_TEST_SLEEP_HELPER") != "1" {
		return
	}
	time.Sleep(20 * time.Second)
}
