// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/corral-dev/corral/api"
)

var quotaCommand = Command{
	Name: "quota", Summary: "see your quotas and use; set a tenant's (admin key)",
	Subs: []Subcommand{
		{Name: "get", Usage: "get [TENANT]", Summary: "quotas and use: yours, or a tenant's (admin key)", Run: runQuotaGet},
		{Name: "ls", Aliases: []string{"list"}, Usage: "ls", Summary: "every tenant with quotas of its own or sandboxes (admin key)", Run: runQuotaList},
		{Name: "set", Usage: "set TENANT [--running N] [--sandboxes N] [--cpu Q] [--memory Q] [--creates-per-minute N] [--snapshots N] [--snapshot-bytes Q] [--policy P] [--queue-timeout D]",
			Summary: "change a tenant's quotas: the flags given (0: no bound), the rest kept", Run: runQuotaSet},
		{Name: "rm", Usage: "rm TENANT...", Summary: "put tenants back on the server's defaults", Run: runQuotaRemove},
	},
	Note: "Policies: reject (429 with Retry-After), queue (wait for room, fairly), pause-oldest (pause the tenant's\nleast recently active sandboxes). docs/quotas.md has the details.",
}

func runQuotaGet(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "quota get", "quota get [TENANT]")
	cf.register(fs)
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, 1, func(pos, _ []string) string {
		if len(pos) > 1 {
			return "quota get: give at most one tenant"
		}
		return ""
	})
	if !ok {
		return code
	}
	var st *api.QuotaStatus
	var err error
	if len(inv.pos) == 1 {
		st, err = inv.c.TenantQuota(ctx, inv.pos[0])
	} else {
		st, err = inv.c.Quota(ctx)
	}
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "table" {
		_ = printValue(e.Stdout, cf.output, st)
		return 0
	}
	printQuota(e, st)
	return 0
}

// printQuota shows a tenant's limits beside its use, and where each
// limit comes from.
func printQuota(e *env, st *api.QuotaStatus) {
	l, u, o := st.Limits, st.Usage, st.Overrides
	num := func(n int64) string {
		if n == 0 {
			return "-"
		}
		return strconv.FormatInt(n, 10)
	}
	str := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	src := func(set bool) string {
		if set {
			return "tenant"
		}
		return "server"
	}
	fmt.Fprintf(e.Stdout, "tenant %s\n", st.Tenant)
	t := newTable(e.Stdout, "QUOTA", "LIMIT", "USED", "SET BY")
	t.row("running", num(l.Running), strconv.FormatInt(u.Running, 10), src(o.Running != nil))
	t.row("sandboxes", num(l.Sandboxes), strconv.FormatInt(u.Sandboxes, 10), src(o.Sandboxes != nil))
	t.row("cpu", str(l.CPU), str(u.CPU), src(o.CPU != nil))
	t.row("memory", str(l.Memory), str(u.Memory), src(o.Memory != nil))
	t.row("createsPerMinute", num(l.CreatesPerMinute), strconv.FormatInt(u.CreatesLastMinute, 10), src(o.CreatesPerMinute != nil))
	t.row("snapshots", num(l.Snapshots), "", src(o.Snapshots != nil))
	t.row("snapshotBytes", str(l.SnapshotBytes), "", src(o.SnapshotBytes != nil))
	t.row("policy", l.Policy, "", src(o.Policy != nil))
	t.row("queueTimeout", (time.Duration(l.QueueTimeoutSeconds) * time.Second).String(), strconv.FormatInt(u.Queued, 10)+" queued", src(o.QueueTimeoutSeconds != nil))
	t.flush()
}

func runQuotaList(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "quota ls", "quota ls")
	cf.register(fs)
	if ok, code := parseNoArgs(fs, e, args, "quota ls"); !ok {
		return code
	}
	c, err := cf.client(e)
	if err != nil {
		return cf.fail(e, err, 1)
	}
	items, err := c.ListQuotas(ctx)
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "table" {
		_ = printValue(e.Stdout, cf.output, items)
		return 0
	}
	t := newTable(e.Stdout, "TENANT", "RUNNING", "SANDBOXES", "CPU", "MEMORY", "POLICY", "QUEUED")
	frac := func(used, limit int64) string {
		if limit == 0 {
			return strconv.FormatInt(used, 10)
		}
		return fmt.Sprintf("%d/%d", used, limit)
	}
	for _, st := range items {
		t.row(st.Tenant, frac(st.Usage.Running, st.Limits.Running), frac(st.Usage.Sandboxes, st.Limits.Sandboxes),
			st.Usage.CPU+"/"+st.Limits.CPU, st.Usage.Memory+"/"+st.Limits.Memory, st.Limits.Policy, strconv.FormatInt(st.Usage.Queued, 10))
	}
	t.flush()
	return 0
}

func runQuotaSet(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "quota set", "quota set TENANT [flags]")
	cf.register(fs)
	running := fs.Int64("running", 0, "running sandboxes (0: no bound)")
	sandboxes := fs.Int64("sandboxes", 0, "sandboxes not yet ended, paused ones included (0: no bound)")
	cpu := fs.String("cpu", "", "the cpu of the running sandboxes together (4 or 4000m; 0: no bound)")
	memory := fs.String("memory", "", "their memory together (16Gi; 0: no bound)")
	creates := fs.Int64("creates-per-minute", 0, "creates in any minute (0: no bound)")
	snapshots := fs.Int64("snapshots", 0, "snapshots kept (0: no bound)")
	snapBytes := fs.String("snapshot-bytes", "", "bytes the snapshots hold together (0: no bound)")
	volBytes := fs.String("volume-bytes", "", "the sizes of the named volumes together (100Gi; 0: no bound)")
	policy := fs.String("policy", "", "reject, queue or pause-oldest")
	queueTimeout := fs.Duration("queue-timeout", 0, "how long a queued create or resume waits (at most 10m)")
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, 1, nArgs(1, "quota set: give one tenant"))
	if !ok {
		return code
	}
	cur, err := inv.c.TenantQuota(ctx, inv.pos[0])
	if err != nil {
		return cf.apiFail(e, err)
	}
	q := cur.Overrides
	changed := 0
	fs.Visit(func(f *flag.Flag) {
		changed++
		switch f.Name {
		case "running":
			q.Running = running
		case "sandboxes":
			q.Sandboxes = sandboxes
		case "cpu":
			q.CPU = cpu
		case "memory":
			q.Memory = memory
		case "creates-per-minute":
			q.CreatesPerMinute = creates
		case "snapshots":
			q.Snapshots = snapshots
		case "snapshot-bytes":
			q.SnapshotBytes = snapBytes
		case "volume-bytes":
			q.VolumeBytes = volBytes
		case "policy":
			q.Policy = policy
		case "queue-timeout":
			s := int64(*queueTimeout / time.Second)
			q.QueueTimeoutSeconds = &s
		default:
			changed--
		}
	})
	if changed == 0 {
		return fail(e, "quota set: give at least one quota flag (corral quota --help)")
	}
	st, err := inv.c.SetQuota(ctx, inv.pos[0], q)
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "table" {
		_ = printValue(e.Stdout, cf.output, st)
		return 0
	}
	printQuota(e, st)
	return 0
}

func runQuotaRemove(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "quota rm", "quota rm TENANT...")
	cf.register(fs)
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, 1, someArgs("quota rm: give at least one tenant"))
	if !ok {
		return code
	}
	status := 0
	for _, t := range inv.pos {
		if err := inv.c.ClearQuota(ctx, t); err != nil {
			status = cf.apiFail(e, err)
			continue
		}
		fmt.Fprintln(e.Stdout, t)
	}
	return status
}
