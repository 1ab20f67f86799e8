// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/corral-dev/corral/internal/egress/audit"
	"github.com/corral-dev/corral/internal/egress/launch"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/hostnet/uplink"
)

// Each runtime's flags of `corral serve`, registered by the runtime's
// own struct, so that serve names no runtime's details.

// ociFlags are the native runtime's.
type ociFlags struct {
	runtime   string
	hostImage bool
	warmPool  string
}

func (f *ociFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.runtime, "oci-runtime", "runc", "runtime oci: the OCI runtime binary (runc, crun, runsc)")
	fs.BoolVar(&f.hostImage, "host-image", true, `runtime oci: allow image.uri "host" (a read-only view of this machine's /usr; turn off for multi-tenant use)`)
	fs.StringVar(&f.warmPool, "warm-pool", "", `runtime oci: keep sandboxes of these images started ahead of time, claimed by creates ("host=2,python:3.12=1")`)
}

// dockerFlags are the docker runtime's.
type dockerFlags struct {
	host, runtime string
	remote        bool
	publishIP     string
}

func (f *dockerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.host, "docker-host", "", "runtime docker: the engine's address (default $DOCKER_HOST, else unix:///var/run/docker.sock)")
	fs.StringVar(&f.runtime, "docker-runtime", "", "runtime docker: OCI runtime name for containers, such as runsc (default: the engine's)")
	fs.BoolVar(&f.remote, "docker-remote", false, "runtime docker: the engine is on another machine (implied by a tcp:// or ssh:// host): copy the corral binary in, publish execd")
	fs.StringVar(&f.publishIP, "docker-publish-ip", "127.0.0.1", "runtime docker, remote engines: the address execd ports are published on")
}

// kubeFlags are the kubernetes runtime's.
type kubeFlags struct {
	kubeconfig, namespace, records, endpoints, pullPolicy string
}

func (f *kubeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "runtime kubernetes: kubeconfig file (default $KUBECONFIG, ~/.kube/config, or the pod's service account)")
	fs.StringVar(&f.namespace, "kube-namespace", "default", "runtime kubernetes: the namespace of the Sandbox resources")
	fs.StringVar(&f.records, "kube-records", "cluster", "runtime kubernetes: where sandbox records are kept: cluster (Secrets in --kube-namespace; replicas with one --server-id share them and the server is stateless) or local (this data dir)")
	fs.StringVar(&f.endpoints, "kube-endpoints", "auto", "runtime kubernetes: how sandbox ports are reached: pod (addresses; in the cluster or on a node), port-forward (through the API server), auto (pod in a cluster, else port-forward)")
	fs.StringVar(&f.pullPolicy, "kube-image-pull-policy", "", "runtime kubernetes: pull policy of sandbox images (Always, IfNotPresent, Never; default: the cluster's)")
}

// fakeFlags are the fake runtime's (tests).
type fakeFlags struct {
	createDelay time.Duration
}

func (f *fakeFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.createDelay, "fake-create-delay", 0, "runtime fake only: how long each create takes (for tests)")
}

// egressFlags are the policed sandboxes' network, for the runtimes whose
// enforcers run on this machine (oci, docker).
type egressFlags struct {
	uplink, bridge, subnet, upstream, deny, allowPrivate, upstreamCA string
}

func (f *egressFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.uplink, "egress-uplink-netns", "", "network namespace (a path) where sandboxes' bridge and NAT live (default: this machine's)")
	fs.StringVar(&f.bridge, "egress-bridge", uplink.DefaultBridge, "the bridge sandboxes with a network policy are attached to")
	fs.StringVar(&f.subnet, "egress-subnet", uplink.DefaultSubnet.String(), "the IPv4 subnet of that bridge")
	fs.StringVar(&f.upstream, "egress-upstream", "", "DNS resolvers sandboxes' allowed names are resolved with, ip:port comma-separated (default: /etc/resolv.conf's)")
	fs.StringVar(&f.deny, "egress-deny", "", "CIDRs no sandbox may reach whatever its policy, comma-separated (added to metadata, link-local, private ranges, this host and the sandboxes' subnet)")
	fs.StringVar(&f.allowPrivate, "egress-allow-private", "", "parts of the private ranges (RFC 1918, 100.64.0.0/10, 198.18.0.0/15, fc00::/7) sandboxes may reach when their policy allows, comma-separated CIDRs (default: none)")
	fs.StringVar(&f.upstreamCA, "egress-upstream-ca", "", "PEM file of CAs the credential proxy trusts, besides the system's, when it verifies the servers it injects credentials for")
}

// network is the local runtimes' egress network configuration, with
// report receiving the enforcers' decisions.
func (f *egressFlags) network(report func(ctx context.Context, sandboxID string, evs []audit.Event) error) (launch.Config, error) {
	n := launch.Config{Uplink: uplink.Config{Netns: f.uplink, Bridge: f.bridge}, Audit: report}
	if f.subnet != "" {
		p, err := netip.ParsePrefix(f.subnet)
		if err != nil || !p.Addr().Is4() || p.Bits() > 28 {
			return n, fmt.Errorf("--egress-subnet %q: want an IPv4 CIDR of /28 or wider", f.subnet)
		}
		n.Uplink.Subnet = p
	}
	for _, u := range policy.SplitList(f.upstream) {
		if _, err := netip.ParseAddrPort(u); err != nil {
			return n, fmt.Errorf("--egress-upstream %q: want ip:port", u)
		}
		n.Upstreams = append(n.Upstreams, u)
	}
	for _, d := range policy.SplitList(f.deny) {
		p, err := netip.ParsePrefix(d)
		if err != nil {
			return n, fmt.Errorf("--egress-deny %q: want a CIDR", d)
		}
		n.Deny = append(n.Deny, p)
	}
	var err error
	if n.AllowPrivate, err = policy.ParseAllowPrivate(f.allowPrivate); err != nil {
		return n, fmt.Errorf("--egress-allow-private: %w", err)
	}
	if f.upstreamCA != "" {
		if _, err := os.Stat(f.upstreamCA); err != nil {
			return n, fmt.Errorf("--egress-upstream-ca: %w", err)
		}
		n.UpstreamCA = f.upstreamCA
	}
	if f.uplink != "" {
		if _, err := os.Stat(f.uplink); err != nil {
			return n, fmt.Errorf("--egress-uplink-netns: %w", err)
		}
	}
	return n, nil
}
