// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package mcp

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sdk"
)

// ToolNames are every tool corral offers, in the order they are listed.
func ToolNames() []string {
	var names []string
	for _, t := range allTools() {
		names = append(names, t.name)
	}
	return names
}

// validToolName allows what MCP clients accept in a tool name prefix.
func validToolName(s string) bool {
	if s == "" || len(s) > 48 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// allTools are every tool's definition.
func allTools() []tool {
	return []tool{
		def("sandbox_create", "Create a sandbox from the policy's template and wait until it is ready. Its network, resources and time to live are bounded by the policy.", false, createSandbox),
		def("sandbox_connect", "Check that an existing sandbox is running and ready.", true, connectSandbox),
		def("sandbox_kill", "Delete a sandbox and everything in it.", false, killSandbox),
		def("sandbox_get_info", "Show a sandbox's state, image, expiry and metadata.", true, sandboxInfo),
		def("sandbox_list", "List the sandboxes this session may use.", true, listSandboxes),
		def("sandbox_renew", "Set a sandbox to expire timeout_seconds from now (within the policy's limit).", false, renewSandbox),
		def("sandbox_get_metrics", "A sandbox's CPU and memory use.", true, sandboxMetrics),
		def("sandbox_healthcheck", "Whether a sandbox's in-sandbox daemon answers.", true, healthcheck),
		def("sandbox_get_endpoint", "The address of a port a program in the sandbox listens on.", true, sandboxEndpoint),
		def("sandbox_snapshot", "Snapshot a sandbox's file system (on runtimes that support it) and wait until the snapshot is ready.", false, snapshotSandbox),
		def("sandbox_fork", "Make count new sandboxes (1 to 10, within the session's sandbox budget) from a sandbox's file system as it is now: each starts with its files and runs on its own (running processes are not carried).", false, forkSandbox),
		def("command_run", "Run a shell command in a sandbox and return its exit code and output (head and tail kept when long).", false, runCommand),
		def("command_interrupt", "Interrupt a background command.", false, interruptCommand),
		def("code_run", "Run code in a sandbox's code interpreter (Python by default; variables are kept between runs of a context). Images are returned as image content.", false, runCode),
		def("file_read", "Read a file of a sandbox (text; base64 with encoding=base64).", true, readFile),
		def("file_write", "Write a file in a sandbox, creating its directories.", false, writeFile),
		def("file_delete", "Delete files of a sandbox.", false, deleteFiles),
		def("file_search", "Find files under a directory whose names match a glob pattern.", true, searchFiles),
		def("file_create_directories", "Create directories (and their parents).", false, makeDirs),
		def("file_delete_directories", "Delete directories and what they hold.", false, removeDirs),
		def("file_move", "Move or rename files.", false, moveFiles),
		def("file_replace_contents", "Replace text in files; reports how many replacements each file had.", false, replaceContents),
		def("artifact_list", "List the files under the work directory (what the session's programs produced).", true, listArtifacts),
		def("artifact_get", "Fetch a file of the work directory: text as text, images as image content, anything else base64.", true, getArtifact),
	}
}

// SandboxInfo is a sandbox as the tools show it.
type SandboxInfo struct {
	SandboxID string            `json:"sandbox_id"`
	State     string            `json:"state"`
	Reason    string            `json:"reason,omitempty"`
	Image     string            `json:"image,omitempty"`
	ExpiresAt *time.Time        `json:"expires_at,omitempty"`
	CreatedAt *time.Time        `json:"created_at,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

func info(sb *api.Sandbox) SandboxInfo {
	i := SandboxInfo{SandboxID: sb.ID, State: sb.Status.State, Reason: sb.Status.Message, ExpiresAt: sb.ExpiresAt, Metadata: sb.Metadata}
	if !sb.CreatedAt.IsZero() {
		t := sb.CreatedAt
		i.CreatedAt = &t
	}
	if sb.Image != nil {
		i.Image = sb.Image.URI
	}
	return i
}

type createIn struct {
	Image                        string             `json:"image,omitempty" jsonschema:"image reference (default: the policy's)"`
	AuthUsername                 string             `json:"auth_username,omitempty" jsonschema:"registry user for a private image"`
	AuthPassword                 string             `json:"auth_password,omitempty" jsonschema:"registry password for a private image"`
	TimeoutSeconds               *int64             `json:"timeout_seconds,omitempty" jsonschema:"time to live in seconds (default 600)"`
	ReadyTimeoutSeconds          *int64             `json:"ready_timeout_seconds,omitempty" jsonschema:"how long to wait for the sandbox to be ready (default 30)"`
	HealthCheckPollingIntervalMS *int64             `json:"health_check_polling_interval_ms,omitempty" jsonschema:"accepted for compatibility; readiness is polled with backoff"`
	SkipHealthCheck              bool               `json:"skip_health_check,omitempty" jsonschema:"return once the server has created it, without waiting for its daemon"`
	Env                          map[string]string  `json:"env,omitempty" jsonschema:"environment variables of the sandbox"`
	Metadata                     map[string]string  `json:"metadata,omitempty" jsonschema:"labels of the sandbox"`
	Resource                     map[string]string  `json:"resource,omitempty" jsonschema:"resource limits (cpu, memory, pids, disk), at most the policy's"`
	NetworkPolicy                *api.NetworkPolicy `json:"network_policy,omitempty" jsonschema:"egress rules, within the policy's allow-list (default: all of it)"`
	Extensions                   map[string]string  `json:"extensions,omitempty" jsonschema:"not allowed through this tool"`
	Entrypoint                   []string           `json:"entrypoint,omitempty" jsonschema:"the sandbox's main process (default: the server's, which keeps it running)"`
}

// SandboxOut is the result of the tools that show one sandbox.
type SandboxOut struct {
	Failure
	SandboxInfo
	Workdir string   `json:"workdir,omitempty" jsonschema:"the directory paths are relative to"`
	Network []string `json:"network,omitempty" jsonschema:"the egress targets the sandbox may reach (none: no network)"`
}

func createSandbox(ctx context.Context, s *Session, c *call, in createIn) (*SandboxOut, error) {
	if p := s.pinnedID(); p != "" {
		return nil, badArgs("this session has its sandbox (%s); it cannot create others", p)
	}
	if len(in.Extensions) > 0 {
		return nil, badArgs("extensions are not allowed through this tool (they can grant secrets and pools)")
	}
	img, err := s.pol.allowedImage(strings.TrimSpace(in.Image))
	if err != nil {
		return nil, err
	}
	ttl, err := s.pol.timeout(in.TimeoutSeconds)
	if err != nil {
		return nil, err
	}
	res, err := s.pol.resources(in.Resource)
	if err != nil {
		return nil, err
	}
	np, err := s.pol.network(in.NetworkPolicy)
	if err != nil {
		return nil, err
	}
	for k := range in.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, badArgs("env: bad name %q", k)
		}
	}
	argsDigest := Digest(in)
	key, retry := s.createKey(argsDigest)
	if !retry {
		if terr := s.chargeSandbox(); terr != nil {
			s.createDone(argsDigest)
			return nil, terr
		}
	}
	req := api.CreateSandboxRequest{Image: &api.ImageSpec{URI: img}, Timeout: &ttl, ResourceLimits: res,
		Env: s.pol.env(in.Env), Metadata: in.Metadata, Entrypoint: in.Entrypoint, NetworkPolicy: np}
	if s.cfg.CredentialProxy && allows(np) {
		req.CredentialProxy = &api.CredentialProxyConfig{Enabled: true}
	}
	if t := s.pol.Template.Isolation; t != "" {
		req.Extensions = map[string]string{api.ExtensionIsolation: t}
	}
	if in.AuthUsername != "" || in.AuthPassword != "" {
		req.Image.Auth = &api.ImageAuth{Username: in.AuthUsername, Password: in.AuthPassword}
	}
	created, err := s.cfg.Client.CreateSandbox(ctx, req, sdk.CreateOptions{IdempotencyKey: key})
	if err != nil {
		return nil, err
	}
	s.own(created.ID)
	c.sandboxID = created.ID
	if !in.SkipHealthCheck {
		if err := s.waitReady(ctx, created.ID, in.ReadyTimeoutSeconds); err != nil {
			return nil, err
		}
		if wd := s.pol.Template.Workdir; wd != "/" {
			sb, err := s.sandbox(ctx, c, created.ID)
			if err != nil {
				return nil, err
			}
			if err := sb.MakeDirs(ctx, map[string]fs.FileMode{wd: 0o755}); err != nil {
				return nil, err
			}
		}
	}
	sb, err := s.cfg.Client.GetSandbox(ctx, created.ID)
	if err != nil {
		return nil, err
	}
	s.createDone(argsDigest)
	out := &SandboxOut{SandboxInfo: info(sb), Workdir: s.pol.Template.Workdir}
	if np != nil {
		for _, r := range np.Egress {
			if r.Action == "allow" {
				out.Network = append(out.Network, r.Target)
			}
		}
	}
	return out, nil
}

type sandboxIn struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	// ConnectIfMissing is OpenSandbox's; corral connects on demand always.
	ConnectIfMissing bool `json:"connect_if_missing,omitempty" jsonschema:"accepted for compatibility; sandboxes are connected on demand"`
}

type connectIn struct {
	SandboxID                    string `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	ConnectTimeoutSeconds        *int64 `json:"connect_timeout_seconds,omitempty" jsonschema:"how long to wait for it to be ready (default 30)"`
	HealthCheckPollingIntervalMS *int64 `json:"health_check_polling_interval_ms,omitempty" jsonschema:"accepted for compatibility"`
	SkipHealthCheck              bool   `json:"skip_health_check,omitempty"`
}

func connectSandbox(ctx context.Context, s *Session, c *call, in connectIn) (*SandboxOut, error) {
	id, err := s.sandboxID(c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	if !in.SkipHealthCheck {
		if err := s.waitReady(ctx, id, in.ConnectTimeoutSeconds); err != nil {
			return nil, err
		}
	}
	return sandboxInfo(ctx, s, c, sandboxIn{SandboxID: id})
}

// waitReady waits until a sandbox runs and its daemon answers, at most
// secs seconds (default 30).
func (s *Session) waitReady(ctx context.Context, id string, secs *int64) error {
	wait := 30 * time.Second
	if secs != nil && *secs > 0 {
		wait = time.Duration(*secs) * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err := s.cfg.Client.WaitRunning(wctx, id)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return sandboxFault("sandbox %s was not ready within %v", id, wait)
	}
	return err
}

func sandboxInfo(ctx context.Context, s *Session, c *call, in sandboxIn) (*SandboxOut, error) {
	id, err := s.sandboxID(c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	sb, err := s.cfg.Client.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	return &SandboxOut{SandboxInfo: info(sb), Workdir: s.pol.Template.Workdir}, nil
}

// KillOut is sandbox_kill's result.
type KillOut struct {
	Failure
	SandboxID string `json:"sandbox_id"`
	Killed    bool   `json:"killed"`
}

func killSandbox(ctx context.Context, s *Session, c *call, in sandboxIn) (*KillOut, error) {
	id, err := s.sandboxID(c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	if s.pinnedID() != "" {
		return nil, badArgs("this session's sandbox is deleted when the session ends, not by a tool")
	}
	if err := s.cfg.Client.DeleteSandbox(ctx, id); err != nil {
		return nil, err
	}
	s.disown(id)
	return &KillOut{SandboxID: id, Killed: true}, nil
}

type listIn struct {
	Filter struct {
		States   []string          `json:"states,omitempty" jsonschema:"keep sandboxes in these states (Running, Paused, ...)"`
		Metadata map[string]string `json:"metadata,omitempty" jsonschema:"keep sandboxes with these labels"`
		PageSize int               `json:"page_size,omitempty"`
		Page     int               `json:"page,omitempty"`
	} `json:"filter,omitzero"`
}

// ListOut is sandbox_list's result.
type ListOut struct {
	Failure
	Sandboxes   []SandboxInfo `json:"sandboxes"`
	HasNextPage bool          `json:"has_next_page,omitempty"`
}

func listSandboxes(ctx context.Context, s *Session, _ *call, in listIn) (*ListOut, error) {
	out := &ListOut{Sandboxes: []SandboxInfo{}}
	f := in.Filter
	if s.pol.ForeignSandboxes && s.pinnedID() == "" {
		res, err := s.cfg.Client.ListSandboxes(ctx, sdk.ListOptions{States: f.States, Metadata: f.Metadata, Page: f.Page, PageSize: f.PageSize})
		if err != nil {
			return nil, err
		}
		for i := range res.Items {
			out.Sandboxes = append(out.Sandboxes, info(&res.Items[i]))
		}
		out.HasNextPage = res.Pagination.HasNextPage
		return out, nil
	}
	for _, id := range s.Owned() {
		sb, err := s.cfg.Client.GetSandbox(ctx, id)
		if errors.Is(err, sdk.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(f.States) > 0 && !slices.ContainsFunc(f.States, func(st string) bool { return strings.EqualFold(st, sb.Status.State) }) {
			continue
		}
		match := true
		for k, v := range f.Metadata {
			match = match && sb.Metadata[k] == v
		}
		if match {
			out.Sandboxes = append(out.Sandboxes, info(sb))
		}
	}
	return out, nil
}

type renewIn struct {
	SandboxID      string `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	TimeoutSeconds int64  `json:"timeout_seconds" jsonschema:"seconds from now until it expires"`
}

// RenewOut is sandbox_renew's result.
type RenewOut struct {
	Failure
	SandboxID string    `json:"sandbox_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

func renewSandbox(ctx context.Context, s *Session, c *call, in renewIn) (*RenewOut, error) {
	id, err := s.sandboxID(c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	secs := in.TimeoutSeconds
	if _, err := s.pol.timeout(&secs); err != nil {
		return nil, err
	}
	at, err := s.cfg.Client.RenewSandbox(ctx, id, time.Now().Add(time.Duration(secs)*time.Second))
	if err != nil {
		return nil, err
	}
	return &RenewOut{SandboxID: id, ExpiresAt: at}, nil
}

// MetricsOut is sandbox_get_metrics's result.
type MetricsOut struct {
	Failure
	SandboxID   string  `json:"sandbox_id"`
	CPUCount    float64 `json:"cpu_count"`
	CPUUsedPct  float64 `json:"cpu_used_pct"`
	MemTotalMiB float64 `json:"mem_total_mib"`
	MemUsedMiB  float64 `json:"mem_used_mib"`
}

func sandboxMetrics(ctx context.Context, s *Session, c *call, in sandboxIn) (*MetricsOut, error) {
	sb, err := s.sandbox(ctx, c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	m, err := sb.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	return &MetricsOut{SandboxID: sb.ID, CPUCount: m.CPUCount, CPUUsedPct: m.CPUUsedPct, MemTotalMiB: m.MemTotalMiB, MemUsedMiB: m.MemUsedMiB}, nil
}

// HealthOut is sandbox_healthcheck's result.
type HealthOut struct {
	Failure
	SandboxID string `json:"sandbox_id"`
	Healthy   bool   `json:"healthy"`
	Reason    string `json:"reason,omitempty"`
}

func healthcheck(ctx context.Context, s *Session, c *call, in sandboxIn) (*HealthOut, error) {
	sb, err := s.sandbox(ctx, c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sb.WaitReady(hctx); err != nil {
		return &HealthOut{SandboxID: sb.ID, Reason: classify(err).Message}, nil
	}
	return &HealthOut{SandboxID: sb.ID, Healthy: true}, nil
}

type endpointIn struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	Port      int    `json:"port" jsonschema:"the port in the sandbox"`
}

// EndpointOut is sandbox_get_endpoint's result.
type EndpointOut struct {
	Failure
	SandboxID string            `json:"sandbox_id"`
	Port      int               `json:"port"`
	Endpoint  string            `json:"endpoint"`
	Headers   map[string]string `json:"headers,omitempty"`
}

func sandboxEndpoint(ctx context.Context, s *Session, c *call, in endpointIn) (*EndpointOut, error) {
	id, err := s.sandboxID(c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	if in.Port < 1 || in.Port > 65535 {
		return nil, badArgs("port %d: want 1..65535", in.Port)
	}
	if in.Port == api.ExecdPort || in.Port == api.EgressPort {
		// Their tokens would let the caller go around the tool layer
		// (and widen the sandbox's network through the egress API).
		return nil, badArgs("port %d is corral's own (the in-sandbox daemon or the egress API); use the tools instead", in.Port)
	}
	ep, err := s.cfg.Client.GetEndpoint(ctx, id, in.Port, false)
	if err != nil {
		return nil, err
	}
	return &EndpointOut{SandboxID: id, Port: in.Port, Endpoint: ep.Endpoint, Headers: ep.Headers}, nil
}

type forkIn struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"the sandbox to fork (default: the session's only one)"`
	Count     int    `json:"count,omitempty" jsonschema:"how many sandboxes to make, 1 to 10 (default 1)"`
}

// ForkOut is sandbox_fork's result.
type ForkOut struct {
	Failure
	SandboxID string   `json:"sandbox_id"`
	Forks     []string `json:"forks"`
}

// maxForkTool bounds one sandbox_fork call, whatever the budget.
const maxForkTool = 10

func forkSandbox(ctx context.Context, s *Session, c *call, in forkIn) (*ForkOut, error) {
	if p := s.pinnedID(); p != "" {
		return nil, badArgs("this session has its sandbox (%s); it cannot create others", p)
	}
	id, err := s.sandboxID(c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	n := in.Count
	if n == 0 {
		n = 1
	}
	if n < 1 || n > maxForkTool {
		return nil, badArgs("count %d: want 1 to %d", in.Count, maxForkTool)
	}
	if terr := s.chargeSandboxes(n); terr != nil {
		return nil, terr
	}
	// A fork is a create: the template's time to live and environment, not
	// the source's age (which every renew lengthens) and an empty one.
	ttl, _ := s.pol.timeout(nil)
	res, err := s.cfg.Client.Fork(ctx, id, api.ForkRequest{Count: n, Timeout: &ttl, Env: s.pol.Template.Env})
	if err != nil {
		return nil, err
	}
	out := &ForkOut{SandboxID: id, Forks: []string{}}
	for _, sb := range res.Sandboxes {
		s.own(sb.ID)
		out.Forks = append(out.Forks, sb.ID)
	}
	return out, nil
}

type snapshotIn struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	Name      string `json:"name,omitempty" jsonschema:"a name for the snapshot"`
}

// SnapshotOut is sandbox_snapshot's result.
type SnapshotOut struct {
	Failure
	SandboxID  string `json:"sandbox_id"`
	SnapshotID string `json:"snapshot_id"`
	State      string `json:"state"`
}

func snapshotSandbox(ctx context.Context, s *Session, c *call, in snapshotIn) (*SnapshotOut, error) {
	id, err := s.sandboxID(c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	if terr := s.chargeSnapshot(); terr != nil {
		return nil, terr
	}
	snap, err := s.cfg.Client.CreateSnapshot(ctx, id, in.Name)
	if err != nil {
		s.ownSnapshot("")
		return nil, err
	}
	s.ownSnapshot(snap.ID)
	for delay := 100 * time.Millisecond; snap.Status.State == api.SnapshotCreating; delay = min(delay*2, 2*time.Second) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		if snap, err = s.cfg.Client.GetSnapshot(ctx, snap.ID); err != nil {
			return nil, err
		}
	}
	if snap.Status.State != api.SnapshotReady {
		return nil, sandboxFault("snapshot %s is %s: %s", snap.ID, snap.Status.State, snap.Status.Message)
	}
	return &SnapshotOut{SandboxID: id, SnapshotID: snap.ID, State: snap.Status.State}, nil
}
