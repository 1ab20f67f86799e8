// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"os"

	"github.com/corral-dev/corral/internal/caplog"
	"github.com/corral-dev/corral/internal/cli/client"
	"github.com/corral-dev/corral/internal/egress"
)

// runEgress is a sandbox's egress enforcer, run on the host:
// `corral egress --netns PATH [flags]`.
func runEgress(ctx context.Context, e *env, args []string) int {
	fs := client.NewFlagSet(e, "egress", "egress --netns PATH [flags]")
	o := egress.DefaultOptions()
	o.Register(fs)
	if ok, code := client.ParseFlags(fs, e, args); !ok {
		return code
	}
	for _, v := range []struct {
		field *string
		name  string
	}{{&o.Token, "OPENSANDBOX_EGRESS_TOKEN"}, {&o.SandboxID, "OPENSANDBOX_EGRESS_SANDBOX_ID"}, {&o.Policy, "OPENSANDBOX_EGRESS_RULES"}} {
		if *v.field == "" {
			*v.field = e.Getenv(v.name)
		}
	}
	if o.LogLimit < 0 {
		return client.Fail(e, "egress: --log-limit %d: want a size in bytes, 0 for none", o.LogLimit)
	}
	logw := e.Stderr
	if f, ok := logw.(*os.File); ok && o.LogLimit > 0 {
		// What the sandbox does decides how much the enforcer logs.
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			logw = caplog.New(f, o.LogLimit)
		}
	}
	log, err := client.NewLogger(logw, o.LogFormat, o.LogLevel)
	if err != nil {
		return client.Fail(e, "%v", err)
	}
	if o.SandboxID != "" {
		log = log.With("sandbox_id", o.SandboxID)
	}
	cfg, err := o.Config()
	if err != nil {
		return client.Fail(e, "egress: %v", err)
	}
	cfg.Logger, cfg.DropPrivileges = log, true
	svc, err := egress.New(cfg)
	if err != nil {
		return client.Fail(e, "egress: %v", err)
	}
	if err := svc.Run(ctx); err != nil {
		return client.Fail(e, "egress: %v", err)
	}
	return 0
}
