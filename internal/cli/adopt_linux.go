// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/cli/client"
	"github.com/corral-dev/corral/internal/initproc"
)

// runAdopt personalises a warm sandbox from inside: it writes the
// commands' environment file, starts the entrypoint through PID 1's start
// FIFO (once: a second adoption of the same sandbox only rewrites the
// files), and replaces execd's token, after which the token it was
// started with no longer works.
func runAdopt(ctx context.Context, e *env, args []string) int {
	fs := client.NewFlagSet(e, "adopt", "adopt --token-file F --env-file F --start FIFO  (with $CORRAL_ADOPT)")
	tokenFile := fs.String("token-file", "", "execd's access token file")
	envFile := fs.String("env-file", "", "execd's environment file for commands")
	start := fs.String("start", "", "PID 1's start FIFO")
	if ok, code := client.ParseFlags(fs, e, args); !ok {
		return code
	}
	if *tokenFile == "" || *envFile == "" || *start == "" {
		return client.Fail(e, "adopt: --token-file, --env-file and --start are required")
	}
	var a initproc.Adoption
	if err := json.Unmarshal([]byte(e.Getenv("CORRAL_ADOPT")), &a); err != nil {
		return client.Fail(e, "adopt: $CORRAL_ADOPT: %v", err)
	}
	if len(a.Args) == 0 {
		return client.Fail(e, "adopt: no entrypoint")
	}
	var env strings.Builder
	for _, kv := range a.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(kv, "\n\x00") {
			return client.Fail(e, "adopt: environment entry %q is not KEY=VALUE on one line", kv)
		}
		env.WriteString(kv + "\n")
	}
	if err := writeFileAtomic(*envFile, strings.NewReader(env.String()), 0o600); err != nil {
		return client.Fail(e, "adopt: %v", err)
	}
	started := *start + ".sent"
	if _, err := os.Stat(started); errors.Is(err, os.ErrNotExist) {
		dir, err := os.OpenRoot(filepath.Dir(*start))
		if err != nil {
			return client.Fail(e, "adopt: %v", err)
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = initproc.SendStart(sctx, dir, filepath.Base(*start), initproc.Start{Args: a.Args, Env: a.Env})
		cancel()
		dir.Close()
		if err != nil {
			return client.Fail(e, "adopt: start the entrypoint: %v", err)
		}
		if err := os.WriteFile(started, nil, 0o600); err != nil {
			return client.Fail(e, "adopt: %v", err)
		}
	}
	if err := writeFileAtomic(*tokenFile, strings.NewReader(a.Token), 0o600); err != nil {
		return client.Fail(e, "adopt: %v", err)
	}
	fmt.Fprintln(e.Stdout, "adopted")
	return 0
}
