// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/netns"
	"github.com/corral-dev/corral/internal/driver/uplink"
	"github.com/corral-dev/corral/internal/egress/policy"
)

// NetworkConfig is how sandboxes with a network policy reach out.
type NetworkConfig struct {
	// Uplink is where the bridge and NAT live (default: this machine's
	// network namespace, bridge corral0, subnet 10.213.0.0/16).
	Uplink uplink.Config
	// Upstreams are the resolvers the egress enforcers ask (ip:port;
	// default: the uplink's /etc/resolv.conf).
	Upstreams []string
	// Deny joins every sandbox's always-deny set.
	Deny []netip.Prefix
}

// egressState is what the bundle keeps about a sandbox's enforcer.
type egressState struct {
	Addr      netip.Addr `json:"addr"`
	Pid       int        `json:"pid"`
	StartTime uint64     `json:"startTime"`
}

// egressProc supervises one sandbox's enforcer.
type egressProc struct {
	cancel context.CancelFunc
	done   chan struct{}
}

const egressAPI = "127.0.0.1:18080"

func egressDir(bundle string) string { return filepath.Join(bundle, "egress") }

// uplink opens the uplink on first use.
func (d *Driver) uplink() (*uplink.Uplink, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.up != nil {
		return d.up, nil
	}
	u, err := uplink.Open(d.cfg.Network.Uplink)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errdefs.ErrUnavailable, err)
	}
	d.up = u
	return u, nil
}

// startNetwork gives the sandbox at nsPath its veth and starts its egress
// enforcer with the seed policy; it returns once the rules are in the
// kernel, so the sandbox's first packet is already policed.
func (d *Driver) startNetwork(ctx context.Context, spec driver.Spec, bundle, nsPath string) error {
	pol, err := policy.Decode(spec.NetworkPolicy)
	if err != nil {
		return errdefs.Wrap(errdefs.ErrInvalidArgument, "SANDBOX::INVALID_PARAMETER", "networkPolicy: "+err.Error(), err)
	}
	u, err := d.uplink()
	if err != nil {
		return err
	}
	dir := egressDir(bundle)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	seed, _ := json.Marshal(pol)
	if err := os.WriteFile(filepath.Join(dir, "policy.json"), seed, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(spec.EgressToken), 0o600); err != nil {
		return err
	}
	resolv := "nameserver 127.0.0.1\noptions ndots:0\n"
	if err := os.WriteFile(filepath.Join(bundle, "resolv.conf"), []byte(resolv), 0o644); err != nil {
		return err
	}
	addr, err := u.Attach(spec.ID, nsPath)
	if err != nil {
		return err
	}
	st := egressState{Addr: addr}
	if err := writeEgressState(bundle, st); err != nil {
		return err
	}
	if st.Pid, st.StartTime, err = d.spawnEgress(spec.ID, bundle, nsPath); err != nil {
		return err
	}
	if err := writeEgressState(bundle, st); err != nil {
		return err
	}
	if err := waitEgress(ctx, nsPath, st, d.cfg.ReadyTimeout, filepath.Join(dir, "log")); err != nil {
		return err
	}
	d.superviseEgress(spec.ID, bundle, nsPath, st)
	return nil
}

func writeEgressState(bundle string, st egressState) error {
	b, _ := json.Marshal(st)
	tmp := filepath.Join(egressDir(bundle), "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(egressDir(bundle), "state.json"))
}

func readEgressState(bundle string) (egressState, bool) {
	var st egressState
	b, err := os.ReadFile(filepath.Join(egressDir(bundle), "state.json"))
	if err != nil || json.Unmarshal(b, &st) != nil {
		return st, false
	}
	return st, true
}

// spawnEgress starts `corral egress` for the sandbox: on the host, in the
// uplink's network namespace (where it asks the upstream resolvers), in
// a session of its own so it outlives a server restart.
func (d *Driver) spawnEgress(id, bundle, nsPath string) (int, uint64, error) {
	u, err := d.uplink()
	if err != nil {
		return 0, 0, err
	}
	hosts, err := u.HostPrefixes()
	if err != nil {
		return 0, 0, err
	}
	deny := []string{u.Subnet().String()}
	for _, p := range append(hosts, d.cfg.Network.Deny...) {
		deny = append(deny, p.String())
	}
	dir := egressDir(bundle)
	args := []string{"egress", "--netns", nsPath, "--policy-file", filepath.Join(dir, "policy.json"),
		"--token-file", filepath.Join(dir, "token"), "--api-listen", egressAPI,
		"--deny", strings.Join(deny, ","), "--sandbox-id", id}
	if len(d.cfg.Network.Upstreams) > 0 {
		args = append(args, "--upstream", strings.Join(d.cfg.Network.Upstreams, ","))
	}
	logf, err := os.OpenFile(filepath.Join(dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, 0, err
	}
	defer logf.Close()
	cmd := exec.Command(d.cfg.CorralBinary, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	start := cmd.Start
	if ns := d.cfg.Network.Uplink.Netns; ns != "" {
		// The child is cloned from this locked thread, inside ns.
		start = func() error { return netns.Do(ns, cmd.Start) }
	}
	if err := start(); err != nil {
		return 0, 0, fmt.Errorf("start the egress enforcer: %w", err)
	}
	pid := cmd.Process.Pid
	st, err := procStartTime(pid)
	// Reap it when it exits while this server runs; supervision watches
	// it through a pidfd either way.
	go func() { _ = cmd.Wait() }()
	if err != nil {
		return 0, 0, fmt.Errorf("the egress enforcer exited at once (see %s)", filepath.Join(dir, "log"))
	}
	return pid, st, nil
}

// waitEgress polls the enforcer's /healthz inside the namespace.
func waitEgress(ctx context.Context, nsPath string, st egressState, timeout time.Duration, logPath string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return netns.Dial(ctx, nsPath, egressAPI)
		},
		DisableKeepAlives: true,
	}}
	delay := time.Millisecond
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://egress/healthz", nil)
		res, err := hc.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !alive(st.Pid, st.StartTime) {
			return &errdefs.Error{Code: "SANDBOX::EGRESS_FAILED",
				Message: "the egress enforcer exited during start: " + lastLine(logPath)}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the egress enforcer did not become ready within %v", timeout)
		case <-time.After(delay):
		}
		delay = min(delay*2, 20*time.Millisecond)
	}
}

func lastLine(path string) string {
	if s := consoleTail(path, 1); s != "" {
		return s
	}
	return "no output"
}

// superviseEgress restarts the enforcer if it dies. The rules it
// programmed stay in the kernel meanwhile, so a dead enforcer fails
// closed: nothing new resolves, nothing unlisted gets out.
func (d *Driver) superviseEgress(id, bundle, nsPath string, st egressState) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &egressProc{cancel: cancel, done: make(chan struct{})}
	d.mu.Lock()
	if old := d.egress[id]; old != nil {
		old.cancel()
	}
	d.egress[id] = p
	d.mu.Unlock()
	go func() {
		defer close(p.done)
		backoff := 100 * time.Millisecond
		for {
			if err := waitPid(ctx, st.Pid, st.StartTime); ctx.Err() != nil {
				return
			} else if err != nil {
				d.log.Warn("watch the egress enforcer", "sandbox_id", id, "err", err)
			}
			d.log.Warn("the egress enforcer exited; restarting it", "sandbox_id", id, "log", filepath.Join(egressDir(bundle), "log"))
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 10*time.Second)
			pid, start, err := d.spawnEgress(id, bundle, nsPath)
			if err != nil {
				d.log.Error("restart the egress enforcer", "sandbox_id", id, "err", err)
				continue
			}
			st.Pid, st.StartTime = pid, start
			if err := writeEgressState(bundle, st); err != nil {
				d.log.Error("record the egress enforcer", "sandbox_id", id, "err", err)
			}
			backoff = 100 * time.Millisecond
		}
	}()
}

// recoverNetwork re-adopts a sandbox's enforcer after a restart,
// starting it again if it is gone.
func (d *Driver) recoverNetwork(id, bundle, nsPath string) error {
	st, ok := readEgressState(bundle)
	if !ok {
		return nil
	}
	u, err := d.uplink()
	if err != nil {
		return err
	}
	if err := u.Reserve(id, st.Addr); err != nil {
		return err
	}
	if st.Pid == 0 || !alive(st.Pid, st.StartTime) {
		if st.Pid, st.StartTime, err = d.spawnEgress(id, bundle, nsPath); err != nil {
			return err
		}
		if err := writeEgressState(bundle, st); err != nil {
			return err
		}
	}
	d.superviseEgress(id, bundle, nsPath, st)
	return nil
}

// stopNetwork ends the enforcer and removes the veth. Idempotent.
func (d *Driver) stopNetwork(ctx context.Context, id, bundle string) error {
	d.mu.Lock()
	p := d.egress[id]
	delete(d.egress, id)
	d.mu.Unlock()
	if p != nil {
		p.cancel()
		<-p.done
	}
	st, ok := readEgressState(bundle)
	if !ok {
		return nil
	}
	if st.Pid > 0 && alive(st.Pid, st.StartTime) {
		_ = syscall.Kill(st.Pid, syscall.SIGKILL)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := waitPid(wctx, st.Pid, st.StartTime)
		cancel()
		if err != nil {
			return fmt.Errorf("stop the egress enforcer (pid %d): %w", st.Pid, err)
		}
	}
	if st.Addr.IsValid() {
		u, err := d.uplink()
		if err != nil {
			return err
		}
		return u.Detach(id, st.Addr)
	}
	return nil
}

// EgressPid returns the pid of sandbox id's enforcer (tests use it).
func (d *Driver) EgressPid(id string) (int, error) {
	st, ok := readEgressState(d.bundleDir(id))
	if !ok || st.Pid == 0 {
		return 0, fmt.Errorf("sandbox %s has no egress enforcer: %w", id, errdefs.ErrNotFound)
	}
	if !alive(st.Pid, st.StartTime) {
		return 0, errors.New("the egress enforcer of " + id + " (pid " + strconv.Itoa(st.Pid) + ") is not running")
	}
	return st.Pid, nil
}
