// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/auth"
	"github.com/corral-dev/corral/internal/cli/client"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/docker"
	"github.com/corral-dev/corral/internal/driver/fakedriver"
	"github.com/corral-dev/corral/internal/driver/oci"
	"github.com/corral-dev/corral/internal/egress/audit"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/lifecycle"
	"github.com/corral-dev/corral/internal/quota"
	model "github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/secrets"
	"github.com/corral-dev/corral/internal/server"
	"github.com/corral-dev/corral/internal/store"
	"github.com/corral-dev/corral/internal/template"
	"github.com/corral-dev/corral/internal/version"
	"github.com/corral-dev/corral/internal/webhook"
)

// serveConfig is everything `corral serve` can be told.
type serveConfig struct {
	// Each runtime's flags, and the egress network's (oci and docker).
	oci                  ociFlags
	docker               dockerFlags
	kube                 kubeFlags
	fake                 fakeFlags
	egress               egressFlags
	e2b                  e2bFlags
	listen               string
	dataDir              string
	e2bConfig            *server.E2BConfig
	endpoints            string
	runtime              string
	configFile           string
	apiKey               string
	insecureNoAuth       bool
	corsOrigins          string
	imageHostCredentials bool
	limitFlags           map[string]*string
	limits               model.Limits
	storageFlags         struct{ maxVolume, maxSnapshotBytes string }
	maxSnapshots         int
	storage              lifecycle.StorageLimits
	origins              []string
	maxTimeout           time.Duration
	allowedHostPaths     string
	// isolation is --isolation, the tiers creates may ask for.
	isolation string
	// hostPaths is allowedHostPaths, checked.
	hostPaths        []string
	retainTerminated time.Duration
	recoveryTimeout  time.Duration
	shutdownTimeout  time.Duration
	logFormat        string
	logLevel         string
	defaultPolicy    string
	// serverID identifies this data dir's server on shared backends.
	serverID string
	// Quotas: each tenant's defaults, and the server's capacity.
	quotaFlags struct {
		running, sandboxes, createsPerMinute, capacity int64
		cpu, memory, volumeBytes, policy               string
		queueTimeout                                   time.Duration
	}
	quota quota.Limits
	// Idle policy.
	idleTimeout, idleCheck, pausedRetention time.Duration
	idleAction                              string
	// Events and webhooks.
	expiryWarning      time.Duration
	webhookAllow       string
	webhookMaxAttempts int
	webhookRetryBase   time.Duration
}

// runtimes is the explicit table of runtimes this binary can drive, each
// with its flags (kubernetes is listed in every build, so that asking
// for it in one without it explains itself).
func (c *serveConfig) runtimes() map[string]runtimeFlags {
	return map[string]runtimeFlags{
		fakedriver.Name: &c.fake, oci.Name: &c.oci, docker.Name: &c.docker, kubeRuntime: &c.kube,
	}
}

// validServerID reports whether id can be a label value on every backend.
func validServerID(id string) bool {
	if len(id) == 0 || len(id) > 63 || id[0] == '-' || id[len(id)-1] == '-' {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// serverID reads (or makes, at the first start) the data dir's server ID.
func serverID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "server-id")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) == 32 {
		return strings.TrimSpace(string(b)), nil
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	id := hex.EncodeToString(b)
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("server id: %w", err)
	}
	return id, nil
}

// auditRecords turns egress decisions into the server's event log's
// records: type egress.dns, egress.connection...; reason the decision;
// the event itself as detail.
func auditRecords(id string, evs []audit.Event) []model.Event {
	out := make([]model.Event, 0, len(evs))
	for _, ev := range evs {
		detail, _ := json.Marshal(ev)
		out = append(out, model.Event{At: ev.Time, SandboxID: id, Type: "egress." + ev.Kind, Reason: ev.Decision,
			Message: ev.Target + ": " + ev.Rule, Detail: string(detail)})
	}
	return out
}

func driverNames() string {
	var names []string
	for n := range (&serveConfig{}).runtimes() {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// defaultDataDir is /var/lib/corral for root and the XDG data dir otherwise.
func defaultDataDir(getenv func(string) string) string {
	if os.Geteuid() == 0 {
		return "/var/lib/corral"
	}
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "corral")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "corral")
	}
	return filepath.Join(os.TempDir(), "corral")
}

func runServe(ctx context.Context, e *env, args []string) int {
	cfg := serveConfig{}
	fs := client.NewFlagSet(e, "serve", "serve [flags]")
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:8080", "address to serve the API on")
	fs.StringVar(&cfg.dataDir, "data-dir", defaultDataDir(e.Getenv), "directory for the state database and runtime files")
	fs.StringVar(&cfg.runtime, "runtime", "oci", "runtime that runs sandboxes ("+driverNames()+")")
	fs.StringVar(&cfg.configFile, "config", "", "TOML configuration file (keys are flag names with '_' for '-'; see 'corral config init')")
	fs.StringVar(&cfg.apiKey, "api-key", "", "seed this admin API key (for scripts and CI); also CORRAL_API_KEY")
	fs.BoolVar(&cfg.insecureNoAuth, "insecure-no-auth", false, "accept requests without an API key (local compatibility tests only); only requests addressed to an IP address or localhost, and none from web pages")
	fs.StringVar(&cfg.corsOrigins, "cors-origins", "", "web origins allowed to call the API from a browser, comma-separated (https://console.example); default: none")
	cfg.limitFlags = map[string]*string{}
	for _, l := range []struct{ key, def, max, what string }{
		{"cpu", "", "", "CPUs (2, 0.5, 500m)"},
		{"memory", "2Gi", "", "memory (512Mi, 2Gi)"},
		{"pids", "", "65536", "processes and threads"},
		{"disk", "", "", "disk written to its root file system (10Gi; the oci runtime makes a file system of that size)"},
	} {
		cfg.limitFlags["default-"+l.key] = fs.String("default-"+l.key, l.def, "a sandbox's "+l.what+" when its create gives none (empty: the runtime's default, or --max-"+l.key+")")
		cfg.limitFlags["max-"+l.key] = fs.String("max-"+l.key, l.max, "the most "+l.what+" a sandbox may ask for (empty: no maximum); more is a 400")
	}
	fs.StringVar(&cfg.storageFlags.maxVolume, "max-volume", "", "the largest named volume a create may make (pvc.storage), and the size of one made without it (default: --max-disk; empty with no --max-disk: no bound)")
	fs.IntVar(&cfg.maxSnapshots, "max-snapshots", 32, "how many snapshots each tenant may keep (0: no bound); one more is a 429 naming the limit")
	fs.StringVar(&cfg.storageFlags.maxSnapshotBytes, "max-snapshot-bytes", "", "how many bytes each tenant's snapshots may hold together (20Gi; empty: no bound beyond --max-snapshots times --max-disk)")
	fs.DurationVar(&cfg.maxTimeout, "max-timeout", 0, "longest time to live a sandbox may ask for (0: no limit, and manual cleanup allowed)")
	fs.StringVar(&cfg.isolation, "isolation", "", `isolation tiers creates may ask for with extensions["corral.dev/isolation"], comma-separated, the first being the default: runc, runsc (gVisor; docs/isolation.md). Default: runc, on the runtimes with tiers (oci, docker)`)
	fs.StringVar(&cfg.allowedHostPaths, "allowed-host-paths", "", "host directories (comma-separated) that host volumes may mount, with what is beneath them; links are resolved first (default: none, host volumes are refused)")
	fs.DurationVar(&cfg.retainTerminated, "retain-terminated", time.Hour, "how long Terminated and Failed sandboxes stay visible")
	fs.DurationVar(&cfg.recoveryTimeout, "recovery-timeout", 2*time.Minute, "time budget for recovering sandboxes at start")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long to let requests finish on shutdown")
	fs.StringVar(&cfg.logFormat, "log-format", "auto", "log format: json, text, or auto (text on a terminal)")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.BoolVar(&cfg.imageHostCredentials, "image-host-credentials", false, "let tenants' pulls without image.auth use this machine's registry logins (~/.docker/config.json); default: such pulls are anonymous")
	cfg.egress.register(fs)
	cfg.e2b.register(fs)
	fs.StringVar(&cfg.endpoints, "endpoints", "direct", "how GET .../endpoints/{port} answers: direct (the runtime's own address of the port, the fastest; a client elsewhere gets the proxy route) or proxy (always the server's proxy route, host/sandboxes/{id}/proxy/{port}, which ends in the port as OpenSandbox's own server answers)")
	for _, rt := range cfg.runtimes() {
		rt.register(fs)
	}
	fs.StringVar(&cfg.defaultPolicy, "network-default-policy", "", `networkPolicy for creates that give none, as JSON (such as '{"defaultAction":"allow"}', OpenSandbox's meaning of no policy); default: such sandboxes have no network`)
	fs.Int64Var(&cfg.quotaFlags.running, "quota-running", 0, "each tenant's default quota of running sandboxes (Pending, Running, Pausing, Resuming; 0: no bound); corral quota sets a tenant's own")
	fs.Int64Var(&cfg.quotaFlags.sandboxes, "quota-sandboxes", 0, "each tenant's default quota of sandboxes not yet ended, paused ones included (0: no bound)")
	fs.StringVar(&cfg.quotaFlags.cpu, "quota-cpu", "", "each tenant's default quota of the cpu of its running sandboxes together (8 or 8000m; empty: no bound); a create must then give a cpu limit (or --default-cpu)")
	fs.StringVar(&cfg.quotaFlags.memory, "quota-memory", "", "each tenant's default quota of the memory of its running sandboxes together (32Gi; empty: no bound)")
	fs.StringVar(&cfg.quotaFlags.volumeBytes, "quota-volume-bytes", "", "each tenant's default quota of the sizes of its named volumes together (100Gi; empty: no bound); a volume it makes must then have a size (pvc.storage, or --max-volume)")
	fs.Int64Var(&cfg.quotaFlags.createsPerMinute, "quota-creates-per-minute", 0, "each tenant's default quota of creates in any minute (0: no bound)")
	fs.StringVar(&cfg.quotaFlags.policy, "quota-policy", quota.PolicyReject, "what a create or resume over a quota gets: reject (429 with Retry-After), queue (waits, fairly across tenants, up to --quota-queue-timeout) or pause-oldest (pauses the tenant's least recently active sandboxes)")
	fs.DurationVar(&cfg.quotaFlags.queueTimeout, "quota-queue-timeout", 30*time.Second, "how long a queued create or resume waits for room before its 429 (at most 10m)")
	fs.Int64Var(&cfg.quotaFlags.capacity, "capacity", 0, "the most sandboxes this server runs for all tenants together (0: no bound); past it, creates are handled by their tenant's --quota-policy, queued ones let in round-robin across tenants")
	fs.DurationVar(&cfg.idleTimeout, "idle-timeout", 0, `how long a sandbox may go without activity (requests, commands, streams) before --idle-action, unless its create says otherwise (extensions["corral.dev/idle-timeout"]); 0: never`)
	fs.StringVar(&cfg.idleAction, "idle-action", model.IdlePause, "what happens to an idle sandbox: pause (a request through the server resumes it) or delete")
	fs.DurationVar(&cfg.idleCheck, "idle-check", 15*time.Second, "how often sandboxes are checked for idleness")
	fs.DurationVar(&cfg.pausedRetention, "paused-retention", 0, "delete sandboxes paused for longer than this (a paused sandbox's time to live does not run down); 0: keep them")
	fs.DurationVar(&cfg.expiryWarning, "expiry-warning", time.Minute, "how long before a sandbox's expiry the event sandbox.expiring is sent (0: never)")
	fs.StringVar(&cfg.webhookAllow, "webhook-allow-cidr", "", "address ranges (comma-separated CIDRs) webhooks may reach although they are loopback, private or link-local (127.0.0.0/8 for a receiver on this host); metadata addresses stay refused. Default: public addresses only")
	fs.IntVar(&cfg.webhookMaxAttempts, "webhook-max-attempts", 12, "attempts of a webhook delivery before it is dead-lettered")
	fs.DurationVar(&cfg.webhookRetryBase, "webhook-retry-base", 5*time.Second, "delay before a failed webhook delivery's first retry; it doubles with each next one (up to an hour), with jitter")
	fs.StringVar(&cfg.serverID, "server-id", "", "this server's identity on a shared backend (its Docker containers and Kubernetes Sandboxes carry it; default: one made at the first start and kept in the data dir). Give it explicitly to keep it when the data dir is lost")
	if ok, code := client.ParseFlags(fs, e, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return client.Fail(e, "serve takes no arguments (got %q)", fs.Args())
	}
	if err := client.ApplyLayers(fs, e, cfg.configFile, "config"); err != nil {
		return client.Fail(e, "%v", err)
	}
	if id := cfg.serverID; id != "" && !validServerID(id) {
		return client.Fail(e, "--server-id %q: want 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit", id)
	}
	origins, err := parseOrigins(cfg.corsOrigins)
	if err != nil {
		return client.Fail(e, "--cors-origins: %v", err)
	}
	if cfg.endpoints != "direct" && cfg.endpoints != "proxy" {
		return client.Fail(e, "--endpoints %q: want direct or proxy", cfg.endpoints)
	}
	if cfg.e2bConfig, err = cfg.e2b.config(); err != nil {
		return client.Fail(e, "%v", err)
	}
	if cfg.limits, err = parseLimits(cfg.limitFlags); err != nil {
		return client.Fail(e, "%v", err)
	}
	if cfg.storage, err = parseStorage(cfg.storageFlags.maxVolume, cfg.storageFlags.maxSnapshotBytes, cfg.maxSnapshots, cfg.limits); err != nil {
		return client.Fail(e, "%v", err)
	}
	if cfg.idleAction != model.IdlePause && cfg.idleAction != model.IdleDelete {
		return client.Fail(e, "--idle-action %q: want pause or delete", cfg.idleAction)
	}
	if cfg.idleTimeout < 0 || cfg.idleCheck <= 0 || cfg.pausedRetention < 0 {
		return client.Fail(e, "--idle-timeout and --paused-retention must not be negative, --idle-check must be positive")
	}
	if cfg.quota, err = parseQuota(&cfg); err != nil {
		return client.Fail(e, "%v", err)
	}
	if cfg.hostPaths, err = parseHostPaths(cfg.allowedHostPaths); err != nil {
		return client.Fail(e, "--allowed-host-paths: %v", err)
	}
	rt, ok := cfg.runtimes()[cfg.runtime]
	if !ok {
		return client.Fail(e, "unknown runtime %q (this build has: %s)", cfg.runtime, driverNames())
	}
	if err := rt.check(cfg.limits); err != nil {
		return client.Fail(e, "runtime %s: %v", cfg.runtime, err)
	}
	if s, ok := rt.(snapshotless); ok && len(cfg.hostPaths) > 0 {
		return client.Fail(e, "--allowed-host-paths: the %s runtime mounts no host volumes: %s", cfg.runtime, s.noHostVolumes())
	}
	cfg.origins = origins
	log, err := client.NewLogger(e.Stderr, cfg.logFormat, cfg.logLevel)
	if err != nil {
		return client.Fail(e, "%v", err)
	}
	if err := serve(ctx, e, &cfg, rt, log); err != nil {
		return client.Fail(e, "%v", err)
	}
	return 0
}

// serve runs the server until ctx ends: the data dir and its stores, the
// runtime, the lifecycle Manager (which recovers what the last run left
// before anything is served), the secrets socket, the API.
func serve(ctx context.Context, e *env, cfg *serveConfig, rt runtimeFlags, log *slog.Logger) (err error) {
	defaultPolicy, err := parseDefaultPolicy(cfg.defaultPolicy)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if n, err := raiseOpenFiles("/proc/sys/fs/nr_open"); err != nil {
		log.WarnContext(ctx, "open-file limit not raised", "limit", n, "err", err)
	} else {
		log.DebugContext(ctx, "open-file limit", "limit", n)
	}
	unlock, err := lockDataDir(cfg.dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := store.Open(ctx, filepath.Join(cfg.dataDir, "corral.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	if cfg.serverID == "" {
		if cfg.serverID, err = serverID(cfg.dataDir); err != nil {
			return err
		}
	}
	host := runtimeHost{dataDir: cfg.dataDir, serverID: cfg.serverID, hostCredentials: cfg.imageHostCredentials, egress: &cfg.egress, log: log}
	cs, keys, closeStores, err := openStores(ctx, e, cfg, rt, host, st)
	if err != nil {
		return err
	}
	defer closeStores()
	// The runtime reports its enforcers' decisions to the Manager, the
	// event log's one writer, which exists only once the runtime does.
	var manager atomic.Pointer[lifecycle.Manager]
	host.audit = func(ctx context.Context, id string, evs []audit.Event) error {
		m := manager.Load()
		if m == nil {
			return errors.New("the server is starting")
		}
		return m.AppendAudit(ctx, auditRecords(id, evs))
	}
	d, warnings, err := startRuntime(ctx, e, cfg.runtime, rt, host)
	if err != nil {
		return err
	}
	if c, ok := d.(io.Closer); ok {
		defer c.Close()
	}
	sec, err := secrets.Open(st, cfg.dataDir)
	if err != nil {
		return err
	}
	// The data dir's store keeps what the runtime keeps no shared copy of.
	var (
		recs      lifecycle.Records
		quotas    lifecycle.QuotaStore = st
		templates template.Store       = st
		hookStore webhook.Store        = st
	)
	if cs != nil {
		recs, quotas, templates, hookStore = cs.recs, cs.quotas, cs.templates, cs.webhooks
	}
	lcfg := lifecycle.Config{
		Driver: d, DriverName: cfg.runtime, Store: st, Records: recs, Quotas: quotas, Logger: log, MaxTimeout: cfg.maxTimeout,
		RecoveryTimeout: cfg.recoveryTimeout, RetainTerminated: cfg.retainTerminated, Secrets: sec,
		DefaultNetworkPolicy: defaultPolicy, Limits: cfg.limits, AllowedHostPaths: cfg.hostPaths, Storage: cfg.storage,
		ExpiryWarning: cfg.expiryWarning, Quota: cfg.quota, Capacity: cfg.quotaFlags.capacity,
		Idle: model.IdlePolicy{Timeout: cfg.idleTimeout, Action: cfg.idleAction}, IdleCheck: cfg.idleCheck, PausedRetention: cfg.pausedRetention,
	}
	if cfg.expiryWarning == 0 {
		lcfg.ExpiryWarning = -1
	}
	if u, ok := rt.(unsizedVolumes); ok {
		lcfg.VolumeSizeUnsupported = u.noVolumeSize()
	}
	if cfg.isolation != "" {
		for _, t := range strings.Split(cfg.isolation, ",") {
			lcfg.Isolation = append(lcfg.Isolation, strings.TrimSpace(t))
		}
	}
	if s, ok := rt.(snapshotless); ok {
		lcfg.SnapshotsUnsupported = s.noSnapshots()
		lcfg.HostVolumesUnsupported = s.noHostVolumes()
	}
	mgr, err := lifecycle.New(lcfg)
	if err != nil {
		return err
	}
	manager.Store(mgr)
	// Bind before recovering, so a port clash is reported at once; serve
	// only after recovery, so no request sees a half-recovered state.
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if err := mgr.Start(ctx); err != nil {
		ln.Close()
		return fmt.Errorf("recovery: %w", err)
	}
	stopSecrets, err := serveSecrets(ctx, sec, mgr, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopSecrets()
	hooks, err := webhooks(cfg, hookStore, mgr, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer hooks.Close()
	srv := server.New(server.Config{Manager: mgr, Keys: keys, Logger: log, InsecureNoAuth: cfg.insecureNoAuth, CORSOrigins: cfg.origins, Secrets: sec,
		HealthWarnings: warnings, Webhooks: hooks, Templates: templates, E2B: cfg.e2bConfig,
		ProxyEndpoints: cfg.endpoints == "proxy"})
	if err := srv.StartWarmPools(ctx); err != nil {
		ln.Close()
		return fmt.Errorf("templates' warm pools: %w", err)
	}
	e2bServer, err := cfg.e2b.serve(srv, cfg.dataDir, log)
	if err != nil {
		ln.Close()
		return err
	}
	if e2bServer != nil {
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.shutdownTimeout)
			defer cancel()
			if err := e2bServer.Shutdown(sctx); err != nil {
				_ = e2bServer.Close()
			}
		}()
	}
	return runUntilDone(ctx, cfg, log, mgr, hooks, srv.NewHTTPServer(cfg.listen), ln)
}

// webhooks is the webhook service over st, delivering the Manager's
// events.
func webhooks(cfg *serveConfig, st webhook.Store, mgr *lifecycle.Manager, log *slog.Logger) (*webhook.Service, error) {
	var allow []netip.Prefix
	for _, c := range policy.SplitList(cfg.webhookAllow) {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("--webhook-allow-cidr: %q: want a CIDR", c)
		}
		allow = append(allow, p.Masked())
	}
	guard, err := webhook.NewGuard(allow)
	if err != nil {
		return nil, fmt.Errorf("--webhook-allow-cidr: %w", err)
	}
	if cfg.webhookMaxAttempts < 1 {
		return nil, fmt.Errorf("--webhook-max-attempts %d: want at least 1", cfg.webhookMaxAttempts)
	}
	if cfg.webhookRetryBase <= 0 {
		return nil, fmt.Errorf("--webhook-retry-base %v: want a positive duration", cfg.webhookRetryBase)
	}
	return webhook.New(webhook.Config{Store: st, Events: mgr, Guard: guard, Logger: log, MaxAttempts: cfg.webhookMaxAttempts,
		RetryBase: cfg.webhookRetryBase, UserAgent: "corral-webhook/" + version.Get().Version})
}

// parseQuota reads the --quota-* flags.
func parseQuota(cfg *serveConfig) (quota.Limits, error) {
	f := cfg.quotaFlags
	l := quota.Limits{Running: f.running, Sandboxes: f.sandboxes, CreatesPerMinute: f.createsPerMinute, Policy: f.policy, QueueTimeout: f.queueTimeout}
	for _, q := range []struct {
		flag, key, v string
		out          *int64
	}{{"--quota-cpu", "cpu", f.cpu, &l.CPUMillis}, {"--quota-memory", "memory", f.memory, &l.MemoryBytes},
		{"--quota-volume-bytes", "memory", f.volumeBytes, &l.VolumeBytes}} {
		if q.v == "" {
			continue
		}
		r, err := model.ParseResources(map[string]string{q.key: q.v})
		if err != nil {
			return l, fmt.Errorf("%s %q: %s", q.flag, q.v, errdefs.Detail(err))
		}
		*q.out = r.CPUMillis + r.MemoryBytes
	}
	for flag, v := range map[string]int64{"--quota-running": f.running, "--quota-sandboxes": f.sandboxes,
		"--quota-creates-per-minute": f.createsPerMinute, "--capacity": f.capacity} {
		if v < 0 {
			return l, fmt.Errorf("%s %d: want 0 (no bound) or more", flag, v)
		}
	}
	if err := l.CheckDefaults(); err != nil {
		return l, fmt.Errorf("--quota-policy/--quota-queue-timeout: %w", err)
	}
	return l, nil
}

// parseDefaultPolicy checks --network-default-policy as a create's policy
// is checked and returns it as JSON (nil when it is not set).
func parseDefaultPolicy(flagValue string) (json.RawMessage, error) {
	if flagValue == "" {
		return nil, nil
	}
	p, err := policy.Decode([]byte(flagValue))
	if err == nil {
		_, err = policy.Compile(p, policy.Options{})
	}
	if err != nil {
		return nil, fmt.Errorf("--network-default-policy: %w", err)
	}
	return json.Marshal(p)
}

// openStores opens the API keys (seeding or minting the first one) and,
// when the runtime keeps them on its backend, the sandbox records: the
// data dir's otherwise (recs nil).
func openStores(ctx context.Context, e *env, cfg *serveConfig, rt runtimeFlags, host runtimeHost, st *store.Store) (
	cs *clusterStores, keys *auth.Keyring, closeStores func(), err error) {
	var keyStore auth.KeyStore = st
	closeStores = func() {}
	if p, ok := rt.(storesProvider); ok {
		c, shared, err := p.stores(ctx, host)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("runtime %s: %w", cfg.runtime, err)
		}
		if shared {
			cs, keyStore, closeStores = c, c.keys, c.close
		}
	}
	if keys, err = auth.Open(ctx, keyStore); err == nil {
		err = bootstrapKeys(ctx, e, cfg, keys, host.log)
	}
	if err != nil {
		closeStores()
		return nil, nil, nil, err
	}
	return cs, keys, closeStores, nil
}

// startRuntime makes the runtime's driver and reports the container
// escapes it is known to be open to, on stderr and in the log.
func startRuntime(ctx context.Context, e *env, name string, rt runtimeFlags, host runtimeHost) (driver.Driver, []string, error) {
	d, err := rt.driver(host)
	if err != nil {
		return nil, nil, fmt.Errorf("runtime %s: %w", name, err)
	}
	var warnings []string
	if w, ok := d.(interface{ Warnings() []string }); ok {
		warnings = w.Warnings()
	}
	for _, w := range warnings {
		host.log.WarnContext(ctx, "the runtime is open to known container escapes", "problem", w)
		fmt.Fprintln(e.Stderr, "corral: WARNING: "+w)
	}
	return d, warnings, nil
}

// serveSecrets serves the sandboxes' secrets socket; reads and (up to a
// rate) denials go to the event log.
func serveSecrets(ctx context.Context, sec *secrets.Service, mgr *lifecycle.Manager, log *slog.Logger) (stop func(), err error) {
	secLn, err := sec.Listen()
	if err != nil {
		return nil, err
	}
	denials := secrets.NewRate(20, 100)
	secServer := sec.Server(sec.Handler(mgr.SecretGrants, func(id, name string, ok bool, why string) {
		typ := "secret.read"
		if !ok {
			typ = "secret.denied"
		}
		log.InfoContext(ctx, "secret requested from a sandbox", "sandbox_id", id, "secret", name, "granted", ok, "why", why)
		// A sandbox hammering the socket must not grow the database
		// without bound.
		if ok || denials.Allow() {
			_ = mgr.AppendAudit(context.WithoutCancel(ctx), []model.Event{{At: time.Now().UTC(), SandboxID: id, Type: typ, Reason: why, Message: name}})
		}
	}, mgr.PostAppEvent))
	go func() { _ = secServer.Serve(secrets.LimitListener(secLn, secrets.MaxConns)) }()
	return func() { _ = secServer.Close() }, nil
}

// runUntilDone runs the Manager and serves the API on ln until ctx ends
// or serving fails, then lets requests finish (--shutdown-timeout); the
// sandboxes keep running.
func runUntilDone(ctx context.Context, cfg *serveConfig, log *slog.Logger, mgr *lifecycle.Manager, hooks *webhook.Service, hs *http.Server, ln net.Listener) (err error) {
	mctx, stopManager := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = mgr.Run(mctx) })
	if hooks != nil {
		wg.Go(func() { _ = hooks.Run(mctx) })
	}
	serveErr := make(chan error, 1)
	wg.Go(func() { serveErr <- hs.Serve(ln) })
	log.InfoContext(ctx, "serving", "listen", "http://"+ln.Addr().String(), "runtime", cfg.runtime, "data_dir", cfg.dataDir)
	select {
	case <-ctx.Done():
		log.InfoContext(ctx, "shutting down; sandboxes keep running")
	case err = <-serveErr:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.shutdownTimeout)
	defer cancel()
	if serr := hs.Shutdown(sctx); serr != nil {
		log.WarnContext(ctx, "requests still running at shutdown", "err", serr)
		_ = hs.Close()
	}
	stopManager()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// bootstrapKeys seeds --api-key, warns about --insecure-no-auth, and on a
// server with no key at all mints an admin key and prints it once.
func bootstrapKeys(ctx context.Context, e *env, cfg *serveConfig, keys *auth.Keyring, log *slog.Logger) error {
	if cfg.apiKey != "" {
		if err := keys.Seed(ctx, cfg.apiKey); err != nil {
			return fmt.Errorf("--api-key: %w", err)
		}
	}
	if cfg.insecureNoAuth {
		log.WarnContext(ctx, "AUTHENTICATION IS OFF: every request acts as the admin of the default tenant (--insecure-no-auth)")
		fmt.Fprintln(e.Stderr, "corral: WARNING: authentication is off (--insecure-no-auth). Anyone who can reach this port controls every sandbox.")
		return nil
	}
	if !keys.Empty() {
		return nil
	}
	key, rec, err := keys.Create(ctx, auth.DefaultTenant, "bootstrap", true)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stderr, `
corral: this server had no API key, so it created an admin key for tenant %q.
        It is stored only as a hash and is shown this once:

    %s

        Use it with:  export OPEN_SANDBOX_API_KEY=%s
        Manage keys:  corral keys --help

`, rec.Tenant, key, key)
	return nil
}

// parseOrigins reads --cors-origins: each a scheme (http or https) and a
// host, with a port or not, and nothing else; "*" is refused.
func parseOrigins(list string) ([]string, error) {
	var out []string
	for _, o := range policy.SplitList(list) {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("%q: want an origin such as https://console.example (a scheme and a host, with a port or not)", o)
		}
		out = append(out, u.Scheme+"://"+u.Host)
	}
	return out, nil
}

// parseLimits reads the --default-* and --max-* resource flags.
func parseLimits(flags map[string]*string) (model.Limits, error) {
	var l model.Limits
	for name, v := range flags {
		if *v == "" {
			continue
		}
		kind, key, _ := strings.Cut(name, "-")
		r, err := model.ParseResources(map[string]string{key: *v})
		if err != nil {
			return l, fmt.Errorf("--%s %q: %v", name, *v, err)
		}
		dst := &l.Default
		if kind == "max" {
			dst = &l.Max
		}
		switch key {
		case "cpu":
			dst.CPUMillis = r.CPUMillis
		case "memory":
			dst.MemoryBytes = r.MemoryBytes
		case "pids":
			dst.Pids = r.Pids
		case "disk":
			dst.DiskBytes = r.DiskBytes
		}
	}
	return l, l.Check()
}

// parseStorage reads --max-volume, --max-snapshot-bytes and
// --max-snapshots; --max-volume defaults to --max-disk.
func parseStorage(maxVolume, maxSnapshotBytes string, maxSnapshots int, l model.Limits) (lifecycle.StorageLimits, error) {
	s := lifecycle.StorageLimits{MaxVolumeBytes: l.Max.DiskBytes, MaxSnapshots: maxSnapshots}
	if maxSnapshots < 0 {
		return s, fmt.Errorf("--max-snapshots %d: want 0 (no bound) or more", maxSnapshots)
	}
	for _, f := range []struct {
		name, v string
		dst     *int64
	}{{"max-volume", maxVolume, &s.MaxVolumeBytes}, {"max-snapshot-bytes", maxSnapshotBytes, &s.MaxSnapshotBytes}} {
		if f.v == "" {
			continue
		}
		n, err := model.ParseBytes(f.v)
		if err != nil || n < 4<<20 {
			return s, fmt.Errorf("--%s %q: want a size of at least 4Mi, such as 10Gi", f.name, f.v)
		}
		*f.dst = n
	}
	return s, nil
}

// parseHostPaths reads --allowed-host-paths: absolute directories,
// resolved through their own links (so a prefix and the paths checked
// against it compare alike). "/" would hand tenants the whole machine and
// is refused.
func parseHostPaths(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("%q is not an absolute path", p)
		}
		real, err := filepath.EvalSymlinks(filepath.Clean(p))
		if err != nil {
			return nil, fmt.Errorf("%q: %v", p, err)
		}
		if real == "/" {
			return nil, fmt.Errorf("%q is the whole file system", p)
		}
		out = append(out, real)
	}
	return out, nil
}
