// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sdk"
)

func runCreate(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "create", "create --image REF [flags]")
	var cf clientFlags
	cf.register(fs, "id", "json", "yaml")
	image := fs.String("image", "", "image reference, or \"host\" on the native runtime (required unless --snapshot)")
	snapshot := fs.String("snapshot", "", "create from this snapshot instead of an image")
	envs := newKV("-e")
	fs.Var(envs, "e", "environment variable KEY=VALUE (repeatable)")
	meta := newKV("-l")
	fs.Var(meta, "l", "metadata label KEY=VALUE (repeatable)")
	fs.Var(meta, "metadata", "same as -l")
	cpu := fs.String("cpu", "", "CPU limit, such as 1 or 500m")
	memory := fs.String("memory", "", "memory limit, such as 512Mi or 2Gi")
	res := newKV("--resource")
	fs.Var(res, "resource", "other resource limit KEY=VALUE, such as pids=256 (repeatable)")
	timeout := fs.Duration("timeout", 30*time.Minute, "time to live; the sandbox is deleted after it (0: no expiry)")
	entry := fs.String("entrypoint", "", `command the sandbox runs: words split on spaces, or a JSON array such as '["sh","-c","sleep 1d"]'`)
	wait := fs.Bool("wait", false, "return only once the sandbox runs and answers commands")
	isolation := fs.String("isolation", "", "isolation tier: runc or runsc (gVisor), among those the server allows (default: the server's)")
	tmpl := fs.String("template", "", "start from this template (corral template ls); the flags given override what it allows")
	if ok, code := parseNoArgs(fs, e, args, "create"); !ok {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *tmpl == "" && (*image == "") == (*snapshot == "") {
		return fail(e, "create: give --image or --snapshot (one of them), or --template")
	}
	req := api.CreateSandboxRequest{SnapshotID: *snapshot, Metadata: meta.m}
	if *image != "" {
		req.Image = &api.ImageSpec{URI: *image}
	}
	if *timeout < 0 {
		return fail(e, "create: --timeout must not be negative")
	}
	req.Timeout = secondsUp(*timeout)
	if len(envs.m) > 0 {
		req.Env = map[string]*string{}
		for k, v := range envs.m {
			req.Env[k] = &v
		}
	}
	limits := map[string]string{}
	for k, v := range res.m {
		limits[k] = v
	}
	if *cpu != "" {
		limits["cpu"] = *cpu
	}
	if *memory != "" {
		limits["memory"] = *memory
	}
	if len(limits) > 0 {
		req.ResourceLimits = limits
	}
	if *isolation != "" {
		req.Extensions = map[string]string{api.ExtensionIsolation: *isolation}
	}
	if *tmpl != "" {
		if req.Extensions == nil {
			req.Extensions = map[string]string{}
		}
		req.Extensions[api.ExtensionTemplate] = *tmpl
		if !set["timeout"] {
			req.Timeout = nil // the template's
		}
	}
	if *entry != "" {
		if strings.HasPrefix(strings.TrimSpace(*entry), "[") {
			if err := json.Unmarshal([]byte(*entry), &req.Entrypoint); err != nil {
				return fail(e, "create: --entrypoint is not a JSON array of strings: %v", err)
			}
		} else {
			req.Entrypoint = strings.Fields(*entry)
		}
	}
	c, err := cf.client(e)
	if err != nil {
		return cf.fail(e, err, 1)
	}
	start := time.Now()
	out, err := c.CreateSandbox(ctx, req, sdk.CreateOptions{Wait: *wait})
	if err != nil {
		if out != nil {
			err = fmt.Errorf("sandbox %s was created but did not become ready: %w", out.ID, err)
		}
		return cf.apiFail(e, err)
	}
	if cf.output != "id" {
		_ = printValue(e.Stdout, cf.output, out)
		return 0
	}
	fmt.Fprintln(e.Stdout, out.ID)
	if isTerminal(e.Stderr) {
		fmt.Fprintf(e.Stderr, "created %s (%s) in %v\n", out.ID, out.Status.State, time.Since(start).Round(time.Millisecond))
	}
	return 0
}

// parseNoArgs parses flags of a command that takes no positional arguments.
func parseNoArgs(fs *flag.FlagSet, e *env, args []string, name string) (bool, int) {
	pos, tail, ok, code := parseArgs(fs, e, args, -1)
	if !ok {
		return false, code
	}
	if len(pos)+len(tail) > 0 {
		fmt.Fprintf(e.Stderr, "corral: %s takes no arguments (got %q)\n", name, append(pos, tail...))
		return false, 2
	}
	return true, 0
}

func runList(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "ls", "ls [--state STATE] [-l KEY=VALUE] [-q] [-o table|json|yaml]")
	var cf clientFlags
	cf.register(fs)
	var states listFlag
	fs.Var(&states, "state", "only sandboxes in this state: Pending, Running, Paused, ... (repeatable)")
	meta := newKV("-l")
	fs.Var(meta, "l", "only sandboxes with this metadata KEY=VALUE (repeatable)")
	quiet := fs.Bool("q", false, "print ids only")
	if ok, code := parseNoArgs(fs, e, args, "ls"); !ok {
		return code
	}
	c, err := cf.client(e)
	if err != nil {
		return cf.fail(e, err, 1)
	}
	items := []api.Sandbox{}
	for sb, err := range c.Sandboxes(ctx, sdk.ListOptions{States: states, Metadata: meta.m}) {
		if err != nil {
			return cf.apiFail(e, err)
		}
		items = append(items, sb)
	}
	switch {
	case *quiet:
		for _, sb := range items {
			fmt.Fprintln(e.Stdout, sb.ID)
		}
	case cf.output != "table":
		_ = printValue(e.Stdout, cf.output, items)
	default:
		now := time.Now()
		t := newTable(e.Stdout, "ID", "IMAGE", "STATE", "AGE", "EXPIRES", "METADATA")
		for _, sb := range items {
			t.row(sb.ID, imageOf(sb), sb.Status.State, age(sb.CreatedAt, now), expiresIn(sb.ExpiresAt, now), labels(sb.Metadata))
		}
		t.flush()
	}
	return 0
}

func imageOf(sb api.Sandbox) string {
	switch {
	case sb.Image != nil:
		return sb.Image.URI
	case sb.SnapshotID != "":
		return "snapshot:" + sb.SnapshotID
	}
	return "-"
}

func expiresIn(t *time.Time, now time.Time) string {
	if t == nil {
		return "never"
	}
	if t.Before(now) {
		return "expired"
	}
	return "in " + age(*t, now)
}

func labels(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, ",")
}

func runGet(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "get", "get ID [-o table|json|yaml]")
	var cf clientFlags
	cf.register(fs)
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, true, 1, nArgs(1, "get: give one sandbox id"))
	if !ok {
		return code
	}
	sb := inv.sb
	if cf.output != "table" {
		_ = printValue(e.Stdout, cf.output, sb)
		return 0
	}
	now := time.Now()
	t := newTable(e.Stdout, "FIELD", "VALUE")
	t.row("id", sb.ID)
	t.row("image", imageOf(*sb))
	t.row("state", sb.Status.State)
	if sb.Isolation != "" {
		t.row("isolation", sb.Isolation)
	}
	if sb.Status.Reason != "" || sb.Status.Message != "" {
		t.row("reason", strings.TrimSpace(sb.Status.Reason+" "+sb.Status.Message))
	}
	t.row("created", sb.CreatedAt.Local().Format(time.RFC3339)+" ("+age(sb.CreatedAt, now)+" ago)")
	if sb.ExpiresAt != nil {
		t.row("expires", sb.ExpiresAt.Local().Format(time.RFC3339)+" ("+expiresIn(sb.ExpiresAt, now)+")")
	} else {
		t.row("expires", "never")
	}
	t.row("entrypoint", commandLine(sb.Entrypoint))
	t.row("metadata", labels(sb.Metadata))
	t.flush()
	return 0
}

// forEachID runs fn for each sandbox id (or prefix) given, reporting
// failures and going on; the exit code is 1 if any failed.
func forEachID(ctx context.Context, e *env, args []string, name, synopsis string, fn func(c *sdk.Client, id string) error) int {
	fs := newFlagSet(e, name, synopsis)
	var cf clientFlags
	cf.register(fs, "table", "json", "yaml")
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, 1, someArgs(name+": give at least one sandbox id"))
	if !ok {
		return code
	}
	c, pos := inv.c, inv.pos
	status := 0
	for _, p := range pos {
		id, err := resolveID(ctx, c, p)
		if err == nil {
			err = fn(c, id)
		}
		if err != nil {
			status = cf.apiFail(e, err)
			continue
		}
		fmt.Fprintln(e.Stdout, id)
	}
	return status
}

func runKill(ctx context.Context, e *env, args []string) int {
	return forEachID(ctx, e, args, "kill", "kill ID...", func(c *sdk.Client, id string) error {
		return c.DeleteSandbox(ctx, id)
	})
}

func runPause(ctx context.Context, e *env, args []string) int {
	return forEachID(ctx, e, args, "pause", "pause ID...", func(c *sdk.Client, id string) error {
		return c.PauseSandbox(ctx, id)
	})
}

func runResume(ctx context.Context, e *env, args []string) int {
	return forEachID(ctx, e, args, "resume", "resume ID...", func(c *sdk.Client, id string) error {
		return c.ResumeSandbox(ctx, id)
	})
}

func runRenew(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "renew", "renew ID [--timeout 30m]")
	var cf clientFlags
	cf.register(fs)
	timeout := fs.Duration("timeout", 30*time.Minute, "new time to live, from now")
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, true, 1, func(pos, _ []string) string {
		if len(pos) != 1 || *timeout <= 0 {
			return "renew: give one sandbox id and a positive --timeout"
		}
		return ""
	})
	if !ok {
		return code
	}
	id := inv.pos[0]
	at, err := inv.c.RenewSandbox(ctx, id, time.Now().Add(*timeout))
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "table" {
		_ = printValue(e.Stdout, cf.output, api.RenewSandboxExpirationResponse{ExpiresAt: at})
		return 0
	}
	fmt.Fprintf(e.Stdout, "%s expires at %s\n", id, at.Local().Format(time.RFC3339))
	return 0
}

func runFork(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "fork", "fork ID [-n COUNT] [flags]")
	var cf clientFlags
	cf.register(fs, "id", "json", "yaml")
	count := fs.Int("n", 1, "how many sandboxes to make (1 to 100)")
	envs := newKV("-e")
	fs.Var(envs, "e", "environment variable KEY=VALUE of the forks (repeatable; the source's is not kept)")
	meta := newKV("-l")
	fs.Var(meta, "l", "metadata label KEY=VALUE of the forks, instead of the source's (repeatable)")
	timeout := fs.Duration("timeout", 0, "the forks' time to live (default: the source's)")
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, true, 1, func(pos, _ []string) string {
		if len(pos) != 1 || *count < 1 || *count > 100 || *timeout < 0 {
			return "fork: give one sandbox id, -n from 1 to 100 and a --timeout that is not negative"
		}
		return ""
	})
	if !ok {
		return code
	}
	req := api.ForkRequest{Count: *count, Env: envs.m, Metadata: meta.m, Timeout: secondsUp(*timeout)}
	res, err := inv.c.Fork(ctx, inv.pos[0], req)
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "id" {
		_ = printValue(e.Stdout, cf.output, res)
		return 0
	}
	for _, sb := range res.Sandboxes {
		fmt.Fprintln(e.Stdout, sb.ID)
	}
	return 0
}

func runEndpoint(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "endpoint", "endpoint ID PORT [--server-proxy]")
	var cf clientFlags
	cf.register(fs, "url", "json", "yaml")
	proxy := fs.Bool("server-proxy", false, "route through the server (for clients that cannot reach the sandbox host)")
	var port int
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, true, 1, func(pos, _ []string) string {
		if len(pos) != 2 {
			return "endpoint: give a sandbox id and a port"
		}
		var err error
		if port, err = strconv.Atoi(pos[1]); err != nil {
			return fmt.Sprintf("endpoint: port %q is not a number", pos[1])
		}
		return ""
	})
	if !ok {
		return code
	}
	c := inv.c
	ep, err := c.GetEndpoint(ctx, inv.pos[0], port, *proxy)
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "url" {
		_ = printValue(e.Stdout, cf.output, ep)
		return 0
	}
	scheme := "http://"
	if strings.HasPrefix(c.BaseURL(), "https://") {
		scheme = "https://"
	}
	fmt.Fprintln(e.Stdout, scheme+ep.Endpoint)
	for k, v := range ep.Headers {
		fmt.Fprintf(e.Stderr, "send header %s: %s\n", k, v)
	}
	return 0
}

var snapshotCommand = Command{
	Name: "snapshot", Summary: "create, list and delete snapshots",
	Subs: []Subcommand{
		{Name: "create", Usage: "create ID [--name NAME]", Summary: "snapshot a running sandbox (prints the snapshot id)", Run: runSnapshotCreate},
		{Name: "ls", Aliases: []string{"list"}, Usage: "ls [--sandbox ID]", Summary: "list snapshots", Run: runSnapshotList},
		{Name: "rm", Usage: "rm SNAPSHOT...", Summary: "delete snapshots", Run: runSnapshotRemove},
	},
	Note: "Create a sandbox from one with 'corral create --snapshot SNAPSHOT'.",
}

func runSnapshotCreate(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "snapshot create", "snapshot create ID [--name NAME]")
	cf.register(fs, "id", "json", "yaml")
	name := fs.String("name", "", "a name to recognise it by")
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, true, 1, nArgs(1, "snapshot create: give one sandbox id"))
	if !ok {
		return code
	}
	sn, err := inv.c.CreateSnapshot(ctx, inv.pos[0], *name)
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "id" {
		_ = printValue(e.Stdout, cf.output, sn)
		return 0
	}
	fmt.Fprintln(e.Stdout, sn.ID)
	return 0
}

func runSnapshotList(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "snapshot ls", "snapshot ls [--sandbox ID]")
	cf.register(fs)
	of := fs.String("sandbox", "", "only snapshots of this sandbox")
	if ok, code := parseNoArgs(fs, e, args, "snapshot ls"); !ok {
		return code
	}
	c, err := cf.client(e)
	if err != nil {
		return cf.fail(e, err, 1)
	}
	items := []api.Snapshot{}
	for page := 1; ; page++ {
		res, err := c.ListSnapshots(ctx, sdk.ListSnapshotsOptions{SandboxID: *of, Page: page, PageSize: 100})
		if err != nil {
			return cf.apiFail(e, err)
		}
		items = append(items, res.Items...)
		if !res.Pagination.HasNextPage {
			break
		}
	}
	if cf.output != "table" {
		_ = printValue(e.Stdout, cf.output, items)
		return 0
	}
	now := time.Now()
	t := newTable(e.Stdout, "ID", "SANDBOX", "NAME", "STATE", "AGE")
	for _, s := range items {
		t.row(s.ID, s.SandboxID, s.Name, s.Status.State, age(s.CreatedAt, now))
	}
	t.flush()
	return 0
}

func runSnapshotRemove(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "snapshot rm", "snapshot rm SNAPSHOT...")
	cf.register(fs)
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, 1, someArgs("snapshot rm: give at least one snapshot id"))
	if !ok {
		return code
	}
	status := 0
	for _, id := range inv.pos {
		if err := inv.c.DeleteSnapshot(ctx, id); err != nil {
			status = cf.apiFail(e, err)
			continue
		}
		fmt.Fprintln(e.Stdout, id)
	}
	return status
}

var diagnosticsCommand = Command{
	Name: "diagnostics", Summary: "print what a sandbox's entrypoint printed, or its event log",
	Subs: []Subcommand{
		{Name: "logs", Usage: "logs ID [-o json]", Summary: "the entrypoint's output (its last MiB)", Run: diagnosticsOf("logs")},
		{Name: "events", Usage: "events ID [--scope lifecycle|network|all] [--limit N] [-o json]", Summary: "the sandbox's events, a line each", Run: diagnosticsOf("events")},
	},
	Note: "The routes are OpenSandbox's diagnostics API (GET /sandboxes/{id}/diagnostics/logs and /events).",
}

func diagnosticsOf(kind string) func(context.Context, *env, []string) int {
	return func(ctx context.Context, e *env, args []string) int {
		var cf clientFlags
		fs := newFlagSet(e, "diagnostics "+kind, "diagnostics "+kind+" ID")
		cf.register(fs, "text", "json", "yaml")
		scope := fs.String("scope", "all", "which part: all, or for events lifecycle or network")
		limit := 0
		if kind == "events" {
			fs.IntVar(&limit, "limit", 0, "the latest events to print (default 500, at most 1000)")
		}
		inv, ok, code := cf.setup(ctx, e, fs, args, -1, true, 1, nArgs(1, "diagnostics "+kind+": give one sandbox id"))
		if !ok {
			return code
		}
		d, err := inv.c.Diagnostics(ctx, inv.pos[0], kind, sdk.DiagnosticOptions{Scope: *scope, Limit: limit})
		if err != nil {
			return cf.apiFail(e, err)
		}
		if cf.output != "text" {
			_ = printValue(e.Stdout, cf.output, d)
			return 0
		}
		fmt.Fprint(e.Stdout, d.Content)
		for _, w := range d.Warnings {
			fmt.Fprintln(e.Stderr, "corral: "+w)
		}
		return 0
	}
}

// secondsUp is a positive duration in whole seconds, rounded up, as the
// API takes a time to live; nil for zero.
func secondsUp(d time.Duration) *int64 {
	if d <= 0 {
		return nil
	}
	secs := int64((d + time.Second - 1) / time.Second)
	return &secs
}
