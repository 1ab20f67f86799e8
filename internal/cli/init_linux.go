// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/cli/client"
	"github.com/corral-dev/corral/internal/egress/nft"
	"github.com/corral-dev/corral/internal/execd"
	"github.com/corral-dev/corral/internal/initproc"
	"github.com/corral-dev/corral/internal/insandbox"
)

// runInit is PID 1 of a sandbox: `corral init [flags] -- ENTRYPOINT...`.
// The execd access token's verifier comes in $EXECD_ACCESS_TOKEN and is
// handed to execd only, never to the entrypoint.
func runInit(_ context.Context, e *env, args []string) int {
	// PID 1 reaps, forwards signals and copies the console: one P is
	// plenty, and each P costs an idle sandbox memory and threads (about
	// 200 KiB and two of its tasks; see docs/benchmarks.md#density).
	runtime.GOMAXPROCS(1)
	// Started with GOMAXPROCS=1 for the same reason (the runtime's, not
	// the sandbox's): nothing PID 1 starts sees it.
	initproc.DropOwnEnv()
	fs := client.NewFlagSet(e, "init", "init [flags] -- PROGRAM [ARGS...]")
	o := initproc.DefaultOptions()
	o.Register(fs)
	if ok, code := client.ParseFlags(fs, e, args); !ok {
		return code
	}
	if o.GateFD != 0 {
		if err := initproc.WaitGate(o.GateFD); err != nil {
			return client.Fail(e, "init: --gate-fd %d: %v", o.GateFD, err)
		}
	}
	if o.IsolateNetwork != "" {
		// Fail closed: an entrypoint never runs in a namespace that could
		// not be isolated.
		var err error
		if o.IsolateNetwork == "any" {
			err = nft.IsolateOutbound()
		} else {
			ports, ok := nft.ParsePorts(o.IsolateNetwork)
			if !ok {
				return client.Fail(e, "init: --isolate-network %q: want ports from 1 to 65535, comma-separated, or any", o.IsolateNetwork)
			}
			err = nft.Isolate(ports)
		}
		if err != nil {
			return client.Fail(e, "init: --isolate-network: %v", err)
		}
		if err := initproc.DropCapability(unix.CAP_NET_ADMIN); err != nil {
			return client.Fail(e, "init: --isolate-network: give up CAP_NET_ADMIN: %v", err)
		}
	}
	entryEnv := insandbox.UserEnv(os.Environ())
	if o.TrustCA != "" {
		// A sandbox that cannot be made to trust its CA still runs; its
		// TLS clients will refuse the credential proxy, visibly.
		if err := initproc.InstallCA(o.TrustCA, insandbox.CABundle); err != nil {
			fmt.Fprintf(e.Stderr, "corral init: %v\n", err)
		}
	}
	if err := initproc.PrepareWarm(o.WaitStart, o.ExecdTokenFile, e.Getenv(insandbox.ExecdTokenEnv)); err != nil {
		return client.Fail(e, "init: %v", err)
	}
	o.Entrypoint = fs.Args()
	cfg := initproc.Config{Entrypoint: o.Entrypoint, Env: entryEnv, Stderr: e.Stderr, StartFIFO: o.WaitStart, StartFile: o.WaitStartFile,
		WaitURL: o.WaitURL, WaitTimeout: o.WaitTimeout, ConsoleLimit: o.ConsoleLimit, ConsoleRelay: o.ConsoleRelay}
	if o.ExitFD != 0 {
		f, err := initproc.ExitFile(o.ExitFD)
		if err != nil {
			return client.Fail(e, "init: --exit-fd %d: %v", o.ExitFD, err)
		}
		cfg.ExitFile = f
	} else if o.ExitPath != "" {
		// Not through a link: whatever the image left there.
		f, err := os.OpenFile(o.ExitPath, os.O_CREATE|os.O_RDWR|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return client.Fail(e, "init: --exit-path %q: %v", o.ExitPath, err)
		}
		cfg.ExitFile = f
	}
	if o.ConsoleLimit < 0 {
		return client.Fail(e, "init: --console-limit %d: want a size in bytes, 0 for none", o.ConsoleLimit)
	}
	if o.WaitURL != "" {
		if u, err := url.Parse(o.WaitURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return client.Fail(e, "init: --wait-url %q: want an http:// or https:// URL", o.WaitURL)
		}
		if o.WaitTimeout <= 0 {
			return client.Fail(e, "init: --wait-timeout %v: want a positive duration", o.WaitTimeout)
		}
	}
	if o.User != "" {
		cred, err := initproc.LookupCredential(o.User)
		if err != nil {
			return client.Fail(e, "init: --user %q: %v", o.User, err)
		}
		cfg.Credential = cred
	}
	if !o.NoExecd {
		// Bound before anything else runs, and held while execd restarts:
		// no program in the sandbox can take execd's port.
		sock, err := listenFile(o.ExecdListen)
		if err != nil {
			return client.Fail(e, "init: listen on %s for execd: %v", o.ExecdListen, err)
		}
		if o.ReadyFD != 0 {
			if err := initproc.SignalReady(o.ReadyFD); err != nil {
				return client.Fail(e, "init: --ready-fd %d: %v", o.ReadyFD, err)
			}
		}
		ecfg := execd.Config{Listen: o.ExecdListen, AccessToken: e.Getenv(insandbox.ExecdTokenEnv), AccessTokenFile: o.ExecdTokenFile,
			StateDir: o.ExecdStateDir, EnvFile: o.ExecdEnvFile, Retention: defaultRetention}
		if cfg.Env, ecfg.UserEnvFile, err = initproc.ExecdEnvs(cfg.Env, insandbox.ExecdEnvs, cfg.Credential); err != nil {
			// Commands then just do not see what the entrypoint would
			// have written there.
			fmt.Fprintf(e.Stderr, "corral init: %v\n", err)
		}
		cfg.Daemon = func(ctx context.Context, stderr io.Writer) error { return serveExecd(ctx, ecfg, sock, stderr) }
	}
	return initproc.Run(cfg)
}

// serveExecd is execd inside PID 1, on a duplicate of the listening
// socket sock (closing it when execd stops leaves the port bound).
func serveExecd(ctx context.Context, cfg execd.Config, sock *os.File, stderr io.Writer) error {
	log, err := client.NewLogger(stderr, "json", "info")
	if err != nil {
		return err
	}
	cfg.Logger = log
	srv, err := execd.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.FileListener(sock)
	if err != nil {
		return err
	}
	defer trimMemory(ctx)()
	return srv.Serve(ctx, ln)
}

// listenFile binds execd's TCP address and returns the socket as a file,
// which PID 1 holds for as long as it lives (each run of execd serves a
// duplicate of it).
func listenFile(addr string) (*os.File, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	return ln.(*net.TCPListener).File()
}
