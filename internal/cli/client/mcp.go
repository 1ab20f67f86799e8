// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/version"
	"github.com/corral-dev/corral/mcp"
)

// mcpFlags are what `corral mcp` and `corral agent` share: where the
// corral server is, the policy and the trace.
type mcpFlags struct {
	cf       clientFlags
	domain   string
	protocol string
	timeout  int
	policy   string
	trace    string
}

func (f *mcpFlags) register(fs *flag.FlagSet) {
	f.cf.register(fs, "json")
	fs.StringVar(&f.domain, "domain", "", "the corral server as host:port (OpenSandbox's flag; --server takes a URL)")
	fs.StringVar(&f.protocol, "protocol", "http", "http or https, with --domain")
	fs.IntVar(&f.timeout, "request-timeout-seconds", 30, "timeout of one request to the corral server (a command's own timeout comes from the policy)")
	fs.StringVar(&f.policy, "policy", "", "tool policy file (TOML; default: every tool, no network, 1 CPU, 2 GiB, 1 h, /workspace)")
	fs.StringVar(&f.trace, "trace", "", "write one JSON line per tool call to this file (default: standard error)")
}

// setup loads the policy, connects to corral and opens the trace.
func (f *mcpFlags) setup(e *env) (mcp.Config, func(), error) {
	pol := mcp.DefaultPolicy()
	if f.policy != "" {
		var err error
		if pol, err = mcp.LoadPolicy(f.policy); err != nil {
			return mcp.Config{}, nil, err
		}
	}
	if f.domain != "" && f.cf.server == "" {
		if f.protocol != "http" && f.protocol != "https" {
			return mcp.Config{}, nil, errors.New("--protocol: want http or https")
		}
		f.cf.server = f.protocol + "://" + f.domain
	}
	if f.timeout > 0 {
		// It bounds the wait for an answer's headers, not the reading of
		// its body: a command's stream lasts as long as the command.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = time.Duration(f.timeout) * time.Second
		f.cf.http = &http.Client{Transport: tr}
	}
	client, err := f.cf.client(e)
	if err != nil {
		return mcp.Config{}, nil, err
	}
	w := e.Stderr
	closeTrace := func() {}
	if f.trace != "" {
		tf, err := os.OpenFile(f.trace, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return mcp.Config{}, nil, err
		}
		w, closeTrace = tf, func() { tf.Close() }
	}
	return mcp.Config{Client: client, Policy: pol, Trace: slog.New(slog.NewJSONHandler(w, nil)), Version: version.Get().Version}, closeTrace, nil
}

// runMCP is `corral mcp`: the MCP server over stdio or streamable HTTP.
func runMCP(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "mcp", "mcp [flags]")
	var f mcpFlags
	f.register(fs)
	transport := fs.String("transport", "stdio", "stdio, or streamable-http (also: http)")
	listen := fs.String("listen", "127.0.0.1:8765", "address of the HTTP transport (loopback unless you mean it)")
	key := fs.String("mcp-key", "", "key HTTP clients must send as Authorization: Bearer KEY (default: $CORRAL_MCP_KEY)")
	var origins listFlag
	fs.Var(&origins, "allow-origin", "browser origin allowed to call the HTTP transport, such as http://localhost:6274 (repeatable)")
	sessionTimeout := fs.Duration("session-timeout", 30*time.Minute, "end an HTTP session idle this long and delete its sandboxes")
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return fail(e, "mcp: unexpected argument %q", fs.Arg(0))
	}
	cfg, closeTrace, err := f.setup(e)
	if err != nil {
		return fail(e, "mcp: %v", err)
	}
	defer closeTrace()
	switch *transport {
	case "stdio":
		if err := mcp.ServeStdio(ctx, cfg); err != nil && !errors.Is(err, io.EOF) {
			return fail(e, "mcp: %v", err)
		}
		return 0
	case "streamable-http", "http":
	default:
		return fail(e, "mcp: --transport %q: want stdio or streamable-http", *transport)
	}
	if *key == "" {
		*key = e.Getenv("CORRAL_MCP_KEY")
	}
	if len(*key) < 16 {
		return fail(e, "mcp: the HTTP transport needs a key of at least 16 characters: --mcp-key or $CORRAL_MCP_KEY")
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fail(e, "mcp: --listen %q: %v", *listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		cfg.Trace.WarnContext(ctx, "the MCP HTTP transport listens beyond loopback; anyone who can reach it and has the key drives your sandboxes", "listen", *listen)
	}
	for _, o := range origins {
		if !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			return fail(e, "mcp: --allow-origin %q: want scheme://host[:port]", o)
		}
	}
	hub := mcp.NewHub(mcp.HTTPConfig{Config: cfg, APIKey: *key, AllowedOrigins: origins, SessionTimeout: *sessionTimeout})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fail(e, "mcp: %v", err)
	}
	srv := &http.Server{Handler: hub, ReadHeaderTimeout: 10 * time.Second}
	cfg.Trace.InfoContext(ctx, "serving", "listen", "http://"+ln.Addr().String()+"/", "transport", "streamable-http")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		hub.Close()
		return fail(e, "mcp: %v", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	hub.Close()
	return 0
}
