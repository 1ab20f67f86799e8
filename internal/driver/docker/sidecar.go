// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/egress"
	"github.com/corral-dev/corral/internal/egress/dnsproxy"
	"github.com/corral-dev/corral/internal/egress/launch"
	"github.com/corral-dev/corral/internal/egress/mitm"
	"github.com/corral-dev/corral/internal/hostnet/forward"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Egress on a remote engine. The engine's machine cannot run a process
// of ours on its host, so the enforcer runs in a sidecar container: the
// sandbox's container owns the network namespace (the engine's bridge,
// execd's and the egress API's ports published), and the sidecar joins
// it with NET_ADMIN and nothing else the sandbox has, in a PID and mount
// namespace of its own, from an image holding nothing but the corral
// binary, running `corral egress --netns self`. Its own DNS queries and
// the credential proxy's connections leave by a socket mark, which
// setting takes NET_ADMIN (or NET_RAW), neither of which the sandbox
// has. The sandbox's PID 1 holds the entrypoint back until the sidecar's
// /healthz answers, that is until the rules are in the kernel. The API
// serves TLS with a certificate made for this sidecar, which the server
// pins: code in the sandbox that takes port 18080 while the sidecar
// restarts cannot pass for it, so it never receives the token.
const (
	// labelEgressOf marks a sidecar with its sandbox's ID. Sidecars carry
	// no managed label: List never takes one for a sandbox.
	labelEgressOf = "corral.dev/egress-of"
	// sidecarDir holds the sidecar's policy, token and vault.
	sidecarDir = "/var/lib/corral-egress"
	// sidecarMark is the socket mark of the sidecar's own connections.
	sidecarMark = 0x6372
	// sidecarMemory bounds a sidecar's memory.
	sidecarMemory = 256 << 20
	// waitURL is what a policed sandbox's PID 1 waits for.
	waitURL = "https://" + insandbox.EgressLoopback + "/healthz"
	// sidecarBinary is where the sidecar image holds corral.
	sidecarBinary = insandbox.ImageBinary
	// The sidecar API's certificate and key, in the sandbox's directory
	// on this machine and in sidecarDir.
	apiCertFile = "api-cert.pem"
	apiKeyFile  = "api-key.pem"
)

// sidecarCaps are all a sidecar keeps: rules, marks, and port 53.
var sidecarCaps = []string{"NET_ADMIN", "NET_BIND_SERVICE"}

func sidecarName(id string) string { return containerName(id) + "-egress" }

// remoteUpstreams are the resolvers a sidecar asks: the configured ones,
// else this machine's that are not loopback (the engine's machine has
// its own loopback).
func (d *Driver) remoteUpstreams() ([]string, error) {
	if len(d.cfg.Network.Upstreams) > 0 {
		return d.cfg.Network.Upstreams, nil
	}
	out := dnsproxy.Reachable(dnsproxy.SystemResolvers())
	if len(out) == 0 {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, api.CodeAPINotSupported,
			"network policies on a remote Docker engine need resolvers its machine reaches: start the server with --egress-upstream IP:PORT")
	}
	return out, nil
}

// startSidecar creates and starts the enforcer of sandbox id, whose
// container (sandboxCID, running) owns the network namespace, from the
// sidecar image, and follows its audit events.
func (d *Driver) startSidecar(ctx context.Context, id, sandboxCID string, upstreams []string) error {
	c, err := d.inspect(ctx, id)
	if err != nil {
		return err
	}
	if !c.State.Running {
		return d.exitedEarly(ctx, id, c)
	}
	// Never reachable, whatever the policy: the engine's network (its
	// host, the gateway, and every other container on it) and what the
	// server denies everywhere.
	var deny []string
	for _, p := range d.cfg.Network.Deny {
		deny = append(deny, p.String())
	}
	if c.NetworkSettings != nil {
		for _, ep := range c.NetworkSettings.Networks {
			if ep == nil {
				continue
			}
			for _, a := range []struct {
				addr netip.Addr
				bits int
			}{{ep.IPAddress, ep.IPPrefixLen}, {ep.GlobalIPv6Address, ep.GlobalIPv6PrefixLen}, {ep.Gateway, -1}, {ep.IPv6Gateway, -1}} {
				if !a.addr.IsValid() {
					continue
				}
				if a.bits < 0 {
					a.bits = a.addr.BitLen()
				}
				if pfx, err := a.addr.Prefix(a.bits); err == nil {
					deny = append(deny, pfx.String())
				}
			}
		}
	}
	dir := d.egressDir(id)
	if err := makeAPICert(dir, id); err != nil {
		return err
	}
	files, vault, err := sidecarFiles(dir, d.cfg.Network.UpstreamCA)
	if err != nil {
		return err
	}
	image, err := d.sidecarImage(ctx)
	if err != nil {
		return err
	}
	args := d.sidecarArgv(id, upstreams, deny, vault)
	labels := map[string]string{labelEgressOf: id}
	if d.cfg.ServerID != "" {
		labels[sandbox.LabelServer] = d.cfg.ServerID
	}
	pids := int64(256)
	cfg := &container.Config{Image: image, Entrypoint: args, Env: []string{"PATH=/", "GOMEMLIMIT=" + strconv.Itoa(sidecarMemory*3/4)},
		User: "0:0", WorkingDir: "/", Labels: labels, Healthcheck: &container.HealthConfig{Test: []string{"NONE"}}}
	host := &container.HostConfig{
		NetworkMode: container.NetworkMode("container:" + sandboxCID),
		CapDrop:     []string{"ALL"},
		CapAdd:      sidecarCaps,
		SecurityOpt: []string{"no-new-privileges"},
		Runtime:     d.cfg.Runtime,
		// The engine restarts a crashed enforcer in place; its rules stay
		// in the kernel meanwhile (fail closed).
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
		LogConfig:     container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "2"}},
		// Bounded, so a sandbox cannot make its enforcer eat the engine's
		// machine; the engine restarts it if it runs out.
		Resources: container.Resources{PidsLimit: &pids, Memory: sidecarMemory, MemorySwap: sidecarMemory},
	}
	cctx, cancel := d.call(ctx)
	created, err := d.cli.ContainerCreate(cctx, client.ContainerCreateOptions{Config: cfg, HostConfig: host, Name: sidecarName(id)})
	cancel()
	if err != nil {
		return d.engineErr("create the egress sidecar of "+id, err)
	}
	if err := d.copyIn(ctx, created.ID, false, files...); err != nil {
		return err
	}
	cctx, cancel = d.call(ctx)
	_, err = d.cli.ContainerStart(cctx, created.ID, client.ContainerStartOptions{})
	cancel()
	if err != nil {
		return d.engineErr("start the egress sidecar of "+id, err)
	}
	if err := d.waitSidecar(ctx, id, c, false); err != nil {
		return err
	}
	d.followSidecar(id, c)
	return nil
}

// sidecarArgv is the sidecar's command line: an enforcer inside the
// sandbox's namespace, its API on TLS, inbound TCP only to execd and it.
func (d *Driver) sidecarArgv(id string, upstreams, deny []string, vault bool) []string {
	o := egress.DefaultOptions()
	o.Netns, o.ExemptMark, o.SandboxID = "self", fmt.Sprintf("%#x", sidecarMark), id
	o.PolicyFile, o.TokenFile = sidecarDir+"/policy.json", sidecarDir+"/token"
	o.APITLSCert, o.APITLSKey = sidecarDir+"/"+apiCertFile, sidecarDir+"/"+apiKeyFile
	o.Inbound = fmt.Sprintf("%d,%d", insandbox.ExecdPort, insandbox.EgressPort)
	o.Upstreams, o.Deny, o.AllowPrivate = strings.Join(upstreams, ","), strings.Join(deny, ","), launch.JoinPrefixes(d.cfg.Network.AllowPrivate)
	if vault {
		o.VaultDir, o.UpstreamCA = sidecarDir, sidecarDir+"/upstream-ca.pem"
	}
	return o.Argv(sidecarBinary)
}

// sidecarFiles are what a sidecar is given: the seed policy and token
// Prepare wrote, and with a credential vault the sandbox's CA and the
// roots that verify real servers (this machine's, and UpstreamCA).
func sidecarFiles(dir, upstreamCA string) ([]inFile, bool, error) {
	var files []inFile
	for _, name := range []string{"policy.json", "token", apiCertFile, apiKeyFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, false, err
		}
		files = append(files, inFile{Name: strings.TrimPrefix(sidecarDir, "/") + "/" + name, Mode: 0o600, Data: b})
	}
	if launch.CAFile(dir) == "" {
		return files, false, nil
	}
	for _, name := range []string{mitm.CACertFile, mitm.CAKeyFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, false, err
		}
		files = append(files, inFile{Name: strings.TrimPrefix(sidecarDir, "/") + "/" + name, Mode: 0o600, Data: b})
	}
	var roots []byte
	for _, p := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", upstreamCA} {
		if p == "" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil && p == upstreamCA {
			return nil, false, fmt.Errorf("--egress-upstream-ca: %w", err)
		}
		roots = append(append(roots, b...), '\n')
	}
	if !bytes.Contains(roots, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, false, errdefs.New(errdefs.ErrInvalidArgument, api.CodeAPINotSupported,
			"the credential proxy on a remote Docker engine verifies servers with this machine's CA roots, and it has none: start the server with --egress-upstream-ca")
	}
	files = append(files, inFile{Name: strings.TrimPrefix(sidecarDir, "/") + "/upstream-ca.pem", Mode: 0o644, Data: roots})
	return files, true, nil
}

// waitSidecar waits until the sidecar's /healthz answers through the
// published port: its rules are in the kernel. A sidecar that exits
// fails the wait; one the engine is restarting (after a crash) fails it
// only at create, not when recovering.
func (d *Driver) waitSidecar(ctx context.Context, id string, sb container.InspectResponse, recovering bool) error {
	dial, err := d.sidecarDialer(id, sb)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }}}
	deadline := time.Now().Add(d.cfg.ReadyTimeout)
	delay := 5 * time.Millisecond
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://egress/healthz", nil)
		if res, err := hc.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		cctx, cancel := d.call(ctx)
		res, err := d.cli.ContainerInspect(cctx, sidecarName(id), client.ContainerInspectOptions{})
		cancel()
		last := func() string {
			if err != nil {
				return "the engine did not answer"
			}
			return d.lastLog(ctx, res.Container.ID)
		}
		if st := res.Container.State; err == nil && st != nil && !st.Running && (st.Status == container.StateExited || st.Restarting && !recovering) {
			return errdefs.New(errdefs.ErrUnavailable, api.CodeSandboxEgressFailed, "the egress sidecar exited during start: "+last())
		}
		if time.Now().After(deadline) {
			return errdefs.Newf(errdefs.ErrUnavailable, api.CodeSandboxEgressFailed, "the egress sidecar of %s did not become ready within %v: %s",
				id, d.cfg.ReadyTimeout, last())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// lastLog is the last line a container printed, for error messages.
func (d *Driver) lastLog(ctx context.Context, cid string) string {
	cctx, cancel := d.call(ctx)
	defer cancel()
	logs, err := d.cli.ContainerLogs(cctx, cid, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "5"})
	if err != nil {
		return "no output"
	}
	defer logs.Close()
	b, _ := io.ReadAll(io.LimitReader(logs, 64<<10))
	lines := strings.Split(strings.TrimSpace(demux(b)), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		return last
	}
	return "no output"
}

// followSidecar forwards the sidecar's audit events to the server,
// through the published egress port.
func (d *Driver) followSidecar(id string, sb container.InspectResponse) {
	dial, err := d.sidecarDialer(id, sb)
	if err != nil {
		d.cfg.Logger.Warn("the egress sidecar's audit events cannot be followed", "sandbox_id", id, "err", err)
		return
	}
	d.net.Follow(id, d.egressDir(id), dial)
}

// sidecarDialer connects to the sidecar's API through the published
// port, over TLS, and accepts only the certificate made for this
// sidecar: whatever else answers on the port never sees a request.
func (d *Driver) sidecarDialer(id string, sb container.InspectResponse) (forward.Dialer, error) {
	addr, err := d.published(sb, insandbox.EgressPort)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(d.egressDir(id), apiCertFile))
	if err != nil {
		return nil, fmt.Errorf("the egress sidecar's certificate: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("the egress sidecar's certificate is not PEM")
	}
	want := block.Bytes
	cfg := &tls.Config{MinVersion: tls.VersionTLS13,
		// Pinned, not chained: the one certificate this server made.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], want) {
				return errors.New("port 18080 answered with a certificate other than the egress sidecar's")
			}
			return nil
		}}
	return func(ctx context.Context) (net.Conn, error) {
		// Bounded: whatever holds the port may never answer.
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		nd := net.Dialer{KeepAlive: 15 * time.Second}
		c, err := nd.DialContext(hctx, "tcp", addr.String())
		if err != nil {
			return nil, err
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(hctx); err != nil {
			c.Close()
			return nil, err
		}
		return tc, nil
	}, nil
}

// makeAPICert makes the sidecar API's key and self-signed certificate in
// dir.
func makeAPICert(dir, id string) error {
	now := time.Now()
	return mitm.WriteSelfSigned(&x509.Certificate{Subject: pkix.Name{CommonName: "corral egress sidecar " + id},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(20, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		filepath.Join(dir, apiCertFile), filepath.Join(dir, apiKeyFile))
}

// sidecarImage is the engine's image holding nothing but this corral
// binary (at sidecarBinary), imported the first time it is missing:
// sidecars never run the sandbox's image, whose configuration (health
// checks, environment, labels, CA roots) the sandbox's user controls.
func (d *Driver) sidecarImage(ctx context.Context) (string, error) {
	d.imgMu.Lock()
	defer d.imgMu.Unlock()
	if d.sidecarRef == "" {
		f, err := os.Open(d.cfg.CorralBinary)
		if err != nil {
			return "", fmt.Errorf("corral binary: %w", err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("corral binary: %w", err)
		}
		d.sidecarRef = "corral-egress:" + hex.EncodeToString(h.Sum(nil))[:16]
	}
	cctx, cancel := d.call(ctx)
	_, err := d.cli.ImageInspect(cctx, d.sidecarRef)
	cancel()
	if err == nil {
		return d.sidecarRef, nil
	}
	if !cerrdefs.IsNotFound(err) {
		return "", d.engineErr("inspect the egress sidecar image", err)
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := d.writeBinary(tw, strings.TrimPrefix(sidecarBinary, "/"))
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	ictx, cancel := context.WithTimeout(ctx, 4*d.cfg.CallTimeout)
	defer cancel()
	res, err := d.cli.ImageImport(ictx, client.ImageImportSource{Source: pr, SourceName: "-"}, d.sidecarRef, client.ImageImportOptions{})
	pr.Close()
	if err != nil {
		return "", d.engineErr("import the egress sidecar image", err)
	}
	_, _ = io.Copy(io.Discard, res)
	res.Close()
	return d.sidecarRef, nil
}

// sidecar returns sandbox id's egress sidecar; ok is false if it has none.
func (d *Driver) sidecar(ctx context.Context, id string) (container.InspectResponse, bool, error) {
	cctx, cancel := d.call(ctx)
	defer cancel()
	res, err := d.cli.ContainerInspect(cctx, sidecarName(id), client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return container.InspectResponse{}, false, nil
	}
	if err != nil {
		return container.InspectResponse{}, false, d.engineErr("inspect the egress sidecar of "+id, err)
	}
	c := res.Container
	if c.Config == nil || c.Config.Labels[labelEgressOf] != id || c.State == nil {
		return container.InspectResponse{}, false, nil
	}
	return c, true, nil
}

// removeSidecar removes sandbox id's sidecar, if any.
func (d *Driver) removeSidecar(ctx context.Context, id string) error {
	if _, ok, err := d.sidecar(ctx, id); err != nil || !ok {
		return err
	}
	cctx, cancel := d.call(ctx)
	defer cancel()
	_, err := d.cli.ContainerRemove(cctx, sidecarName(id), client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) && !strings.Contains(err.Error(), "is already in progress") {
		return d.engineErr("remove the egress sidecar of "+id, err)
	}
	return nil
}

// recoverSidecar starts a stopped sidecar of a running sandbox again and
// follows it. A policed sandbox whose sidecar is gone is reported: its
// rules stay in the kernel, but nothing answers its DNS or API.
func (d *Driver) recoverSidecar(ctx context.Context, id string, sb container.InspectResponse) error {
	sc, ok, err := d.sidecar(ctx, id)
	if err != nil || !sb.State.Running {
		return err
	}
	if !ok {
		if _, err := os.Stat(filepath.Join(d.egressDir(id), "token")); err != nil {
			return nil // not policed
		}
		// Not ErrNotFound: the sandbox is there, failed closed (its rules
		// stay in the kernel, nothing answers its DNS or API).
		return fmt.Errorf("sandbox %s: its egress sidecar %s was removed; the sandbox has no DNS and its policy cannot change: delete it", id, sidecarName(id))
	}
	if !sc.State.Running && !sc.State.Restarting {
		cctx, cancel := d.call(ctx)
		_, err := d.cli.ContainerStart(cctx, sc.ID, client.ContainerStartOptions{})
		cancel()
		if err != nil {
			return d.engineErr("start the egress sidecar of "+id, err)
		}
	}
	// As a local enforcer is: recovered means policing again.
	if err := d.waitSidecar(ctx, id, sb, true); err != nil {
		return err
	}
	d.followSidecar(id, sb)
	return nil
}
