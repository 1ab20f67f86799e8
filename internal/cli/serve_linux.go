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
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-dev/corral/internal/auth"
	"github.com/corral-dev/corral/internal/cli/client"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/docker"
	"github.com/corral-dev/corral/internal/driver/fakedriver"
	"github.com/corral-dev/corral/internal/driver/oci"
	"github.com/corral-dev/corral/internal/egress/audit"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/lifecycle"
	model "github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/secrets"
	"github.com/corral-dev/corral/internal/server"
	"github.com/corral-dev/corral/internal/store"
)

// serveConfig is everything `corral serve` can be told.
type serveConfig struct {
	// Each runtime's flags, and the egress network's (oci and docker).
	oci                  ociFlags
	docker               dockerFlags
	kube                 kubeFlags
	fake                 fakeFlags
	egress               egressFlags
	listen               string
	dataDir              string
	runtime              string
	configFile           string
	apiKey               string
	insecureNoAuth       bool
	corsOrigins          string
	imageHostCredentials bool
	limitFlags           map[string]*string
	limits               model.Limits
	origins              []string
	maxTimeout           time.Duration
	retainTerminated     time.Duration
	recoveryTimeout      time.Duration
	shutdownTimeout      time.Duration
	logFormat            string
	logLevel             string
	defaultPolicy        string
	// serverID identifies this data dir's server on shared backends.
	serverID string
	// audit receives the egress enforcers' decisions (set by serve).
	audit func(ctx context.Context, sandboxID string, evs []audit.Event) error
}

// driverFactory builds a driver from the serve configuration.
type driverFactory func(cfg *serveConfig, log *slog.Logger) (driver.Driver, error)

// drivers is the explicit table of runtimes this binary can drive.
// kubeRuntime is the name of the kubernetes runtime (kube.Name), known
// here also in builds without it so that asking for it explains itself.
const kubeRuntime = "kubernetes"

func drivers() map[string]driverFactory {
	return map[string]driverFactory{
		fakedriver.Name: func(cfg *serveConfig, _ *slog.Logger) (driver.Driver, error) {
			return fakedriver.New(fakedriver.Config{Dir: filepath.Join(cfg.dataDir, "fake"), CreateDelay: cfg.fake.createDelay})
		},
		oci.Name: func(cfg *serveConfig, log *slog.Logger) (driver.Driver, error) {
			pool, err := oci.ParsePool(cfg.oci.warmPool)
			if err != nil {
				return nil, err
			}
			network, err := cfg.egress.network(cfg.audit)
			if err != nil {
				return nil, err
			}
			return oci.New(oci.Config{Root: filepath.Join(cfg.dataDir, "oci"), Runtime: cfg.oci.runtime, AllowHostImage: cfg.oci.hostImage,
				HostCredentials: cfg.imageHostCredentials, Pool: pool, Network: network, Logger: log})
		},
		kubeRuntime: kubeDriver,
		docker.Name: func(cfg *serveConfig, log *slog.Logger) (driver.Driver, error) {
			bin, err := os.Executable()
			if err != nil {
				return nil, err
			}
			network, err := cfg.egress.network(cfg.audit)
			if err != nil {
				return nil, err
			}
			return docker.New(context.Background(), docker.Config{Host: cfg.docker.host, Runtime: cfg.docker.runtime,
				StateDir: filepath.Join(cfg.dataDir, "docker"), Network: network, ServerID: cfg.serverID,
				Remote: cfg.docker.remote, PublishIP: cfg.docker.publishIP, CorralBinary: bin, Logger: log})
		},
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
	for n := range drivers() {
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
	fs.DurationVar(&cfg.maxTimeout, "max-timeout", 0, "longest time to live a sandbox may ask for (0: no limit, and manual cleanup allowed)")
	fs.DurationVar(&cfg.retainTerminated, "retain-terminated", time.Hour, "how long Terminated and Failed sandboxes stay visible")
	fs.DurationVar(&cfg.recoveryTimeout, "recovery-timeout", 2*time.Minute, "time budget for recovering sandboxes at start")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long to let requests finish on shutdown")
	fs.StringVar(&cfg.logFormat, "log-format", "auto", "log format: json, text, or auto (text on a terminal)")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.BoolVar(&cfg.imageHostCredentials, "image-host-credentials", false, "let tenants' pulls without image.auth use this machine's registry logins (~/.docker/config.json); default: such pulls are anonymous")
	cfg.oci.register(fs)
	cfg.egress.register(fs)
	cfg.docker.register(fs)
	cfg.kube.register(fs)
	cfg.fake.register(fs)
	fs.StringVar(&cfg.defaultPolicy, "network-default-policy", "", `networkPolicy for creates that give none, as JSON (such as '{"defaultAction":"allow"}', OpenSandbox's meaning of no policy); default: such sandboxes have no network`)
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
	if cfg.limits, err = parseLimits(cfg.limitFlags); err != nil {
		return client.Fail(e, "%v", err)
	}
	if cfg.runtime == kubeRuntime && cfg.limits.Default.Pids > 0 {
		return client.Fail(e, "--default-pids: the kubernetes runtime cannot limit one sandbox's processes; the nodes' kubelet limits every pod's (podPidsLimit)")
	}
	if cfg.kube.records != "cluster" && cfg.kube.records != "local" {
		return client.Fail(e, "--kube-records %q: want cluster or local", cfg.kube.records)
	}
	cfg.origins = origins
	log, err := client.NewLogger(e.Stderr, cfg.logFormat, cfg.logLevel)
	if err != nil {
		return client.Fail(e, "%v", err)
	}
	if err := serve(ctx, e, &cfg, log); err != nil {
		return client.Fail(e, "%v", err)
	}
	return 0
}

func serve(ctx context.Context, e *env, cfg *serveConfig, log *slog.Logger) (err error) {
	factory, ok := drivers()[cfg.runtime]
	if !ok {
		return fmt.Errorf("unknown runtime %q (this build has: %s)", cfg.runtime, driverNames())
	}
	var defaultPolicy json.RawMessage
	if cfg.defaultPolicy != "" {
		p, err := policy.Decode([]byte(cfg.defaultPolicy))
		if err == nil {
			// Compiling checks actions and targets, as a create's policy is.
			_, err = policy.Compile(p, policy.Options{})
		}
		if err != nil {
			return fmt.Errorf("--network-default-policy: %w", err)
		}
		defaultPolicy, _ = json.Marshal(p)
	}
	if err := os.MkdirAll(cfg.dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
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
	// The stores: this data dir's, or on Kubernetes by default the
	// cluster's, which every replica shares.
	var keyStore auth.KeyStore = st
	var recs lifecycle.Records
	if cfg.runtime == kubeRuntime {
		if err := kubeCheckFlags(cfg); err != nil {
			return fmt.Errorf("runtime %s: %w", cfg.runtime, err)
		}
		if cfg.kube.records == "cluster" {
			r, ks, err := kubeStores(ctx, cfg, log)
			if err != nil {
				return fmt.Errorf("runtime %s: %w", cfg.runtime, err)
			}
			defer r.Close()
			defer ks.Close()
			recs, keyStore = r, ks
		}
	}
	keys, err := auth.Open(ctx, keyStore)
	if err != nil {
		return err
	}
	if err := bootstrapKeys(ctx, e, cfg, keys, log); err != nil {
		return err
	}
	// The runtime reports its enforcers' decisions to the Manager, the
	// event log's one writer, which exists only once the runtime does.
	var manager atomic.Pointer[lifecycle.Manager]
	cfg.audit = func(ctx context.Context, id string, evs []audit.Event) error {
		m := manager.Load()
		if m == nil {
			return errors.New("the server is starting")
		}
		return m.AppendAudit(ctx, auditRecords(id, evs))
	}
	d, err := factory(cfg, log)
	if err != nil {
		return fmt.Errorf("runtime %s: %w", cfg.runtime, err)
	}
	var warnings []string
	if w, ok := d.(interface{ Warnings() []string }); ok {
		warnings = w.Warnings()
	}
	for _, w := range warnings {
		log.WarnContext(ctx, "the runtime is open to known container escapes", "problem", w)
		fmt.Fprintln(e.Stderr, "corral: WARNING: "+w)
	}
	if c, ok := d.(io.Closer); ok {
		defer c.Close()
	}
	sec, err := secrets.Open(st, cfg.dataDir)
	if err != nil {
		return err
	}
	mgr, err := lifecycle.New(lifecycle.Config{
		Driver: d, DriverName: cfg.runtime, Store: st, Records: recs, Logger: log, MaxTimeout: cfg.maxTimeout,
		RecoveryTimeout: cfg.recoveryTimeout, RetainTerminated: cfg.retainTerminated, Secrets: sec,
		DefaultNetworkPolicy: defaultPolicy, Limits: cfg.limits,
	})
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
	srv := server.New(server.Config{Manager: mgr, Keys: keys, Logger: log, InsecureNoAuth: cfg.insecureNoAuth, CORSOrigins: cfg.origins, Secrets: sec,
		HealthWarnings: warnings})
	hs := srv.NewHTTPServer(cfg.listen)
	secLn, err := sec.Listen()
	if err != nil {
		ln.Close()
		return err
	}
	denials := secrets.NewRate(20, 100)
	secServer := sec.Server(sec.Handler(mgr.SecretGrants, func(id, name string, ok bool, why string) {
		typ := "secret.read"
		if !ok {
			typ = "secret.denied"
		}
		log.Info("secret requested from a sandbox", "sandbox_id", id, "secret", name, "granted", ok, "why", why)
		// Denials are recorded up to a rate: a sandbox hammering the
		// socket must not grow the database without bound.
		if ok || denials.Allow() {
			_ = mgr.AppendAudit(context.WithoutCancel(ctx), []model.Event{{At: time.Now().UTC(), SandboxID: id, Type: typ, Reason: why, Message: name}})
		}
	}))
	defer secServer.Close()
	go func() { _ = secServer.Serve(secrets.LimitListener(secLn, secrets.MaxConns)) }()

	mctx, stopManager := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = mgr.Run(mctx) })
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

// kubeRecordStore is the cluster-backed record store of the kubernetes
// runtime (internal/kube/records in builds with -tags kube).
type kubeRecordStore interface {
	lifecycle.SharedRecords
	io.Closer
}

// kubeKeyStore is its API key store.
type kubeKeyStore interface {
	auth.SharedKeyStore
	io.Closer
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
