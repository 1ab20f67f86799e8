// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/corral-dev/corral/internal/auth"
	"github.com/corral-dev/corral/internal/cli/client"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/docker"
	"github.com/corral-dev/corral/internal/driver/fakedriver"
	"github.com/corral-dev/corral/internal/driver/oci"
	"github.com/corral-dev/corral/internal/egress/audit"
	"github.com/corral-dev/corral/internal/egress/launch"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/hostnet/uplink"
	"github.com/corral-dev/corral/internal/lifecycle"
	model "github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/template"
	"github.com/corral-dev/corral/internal/webhook"
)

// Each runtime's part of `corral serve` is its flags' struct: it
// registers them, checks them and makes the driver, so that serve names
// no runtime's details. The kubernetes runtime's code is in builds with
// -tags kube only; kubeBuild is the one value that differs between them.

// runtimeFlags is one runtime's part of `corral serve`.
type runtimeFlags interface {
	register(fs *flag.FlagSet)
	// check reports a mistaken flag, or limits the runtime cannot keep,
	// before anything is opened.
	check(l model.Limits) error
	driver(h runtimeHost) (driver.Driver, error)
}

// runtimeHost is what serve gives every runtime's driver.
type runtimeHost struct {
	dataDir, serverID string
	// hostCredentials lets pulls without credentials use this machine's.
	hostCredentials bool
	// egress is the policed sandboxes' network, for the runtimes whose
	// enforcers run on this machine; audit receives their decisions.
	egress *egressFlags
	audit  func(ctx context.Context, sandboxID string, evs []audit.Event) error
	log    *slog.Logger
}

// storesProvider is a runtime that keeps sandbox records and API keys on
// its backend rather than in the data dir (kubernetes, by default); ok is
// false when it is told not to.
type storesProvider interface {
	stores(ctx context.Context, h runtimeHost) (cs *clusterStores, ok bool, err error)
}

// clusterStores are what a runtime keeps on its backend for the replicas
// sharing it: the records (with the event log and admission claims), API
// keys, quota overrides, templates and webhook subscriptions.
type clusterStores struct {
	recs      sharedRecords
	keys      sharedKeys
	quotas    lifecycle.QuotaStore
	templates template.Store
	webhooks  webhook.Store
	// close closes them all.
	close func()
}

// sharedRecords is a record store that replicas share.
type sharedRecords interface {
	lifecycle.SharedRecords
	io.Closer
}

// sharedKeys is an API key store that replicas share.
type sharedKeys interface {
	auth.SharedKeyStore
	io.Closer
}

// ociFlags are the native runtime's.
type ociFlags struct {
	runtime   string
	hostImage bool
	warmPool  string
	userns    bool
	runsc     string
}

func (f *ociFlags) check(model.Limits) error {
	if filepath.Base(f.runtime) == "runsc" {
		return fmt.Errorf("--oci-runtime %s: gVisor runs the runsc tier, chosen per sandbox: use --isolation runsc (or runc,runsc), and --oci-runsc for its path", f.runtime)
	}
	return nil
}

func (f *ociFlags) driver(h runtimeHost) (driver.Driver, error) {
	pool, err := oci.ParsePool(f.warmPool)
	if err != nil {
		return nil, err
	}
	network, err := h.egress.network(h.audit)
	if err != nil {
		return nil, err
	}
	return oci.New(oci.Config{Root: filepath.Join(h.dataDir, "oci"), Runtime: f.runtime, AllowHostImage: f.hostImage,
		HostCredentials: h.hostCredentials, Pool: pool, Network: network, UserNamespaces: f.userns, Runsc: f.runsc, Logger: h.log})
}

func (f *ociFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.runtime, "oci-runtime", "runc", "runtime oci: the OCI runtime binary of the runc tier (runc, crun)")
	fs.StringVar(&f.runsc, "oci-runsc", "runsc", "runtime oci: gVisor's runsc binary, for sandboxes of the runsc tier (--isolation)")
	fs.BoolVar(&f.hostImage, "host-image", true, `runtime oci: allow image.uri "host" (a read-only view of this machine's /usr; turn off for multi-tenant use)`)
	fs.BoolVar(&f.userns, "oci-user-namespaces", true, "runtime oci: give each sandbox a user namespace of its own, whose root is an unprivileged host user (docs/isolation.md); off: root in a sandbox is root on the host, held in by capabilities and seccomp only")
	fs.StringVar(&f.warmPool, "warm-pool", "", `runtime oci: keep sandboxes of these images started ahead of time, claimed by creates ("host=2,python:3.12=1")`)
}

// dockerFlags are the docker runtime's.
type dockerFlags struct {
	host, runtime string
	runscRuntime  string
	remote        bool
	publishIP     string
	snapshotLimit string
	// snapshotBytes is snapshotLimit, read by check.
	snapshotBytes int64
}

func (f *dockerFlags) check(model.Limits) error {
	n, err := model.ParseBytes(f.snapshotLimit)
	if err != nil || n <= 0 {
		return fmt.Errorf("--docker-snapshot-limit %q: want a size such as 8Gi", f.snapshotLimit)
	}
	f.snapshotBytes = n
	return nil
}

func (f *dockerFlags) driver(h runtimeHost) (driver.Driver, error) {
	bin, err := os.Executable()
	if err != nil {
		return nil, err
	}
	network, err := h.egress.network(h.audit)
	if err != nil {
		return nil, err
	}
	return docker.New(context.Background(), docker.Config{Host: f.host, Runtime: f.runtime, RunscRuntime: f.runscRuntime,
		StateDir: filepath.Join(h.dataDir, "docker"), Network: network, ServerID: h.serverID,
		Remote: f.remote, PublishIP: f.publishIP, CorralBinary: bin, Logger: h.log, SnapshotLimit: f.snapshotBytes})
}

func (f *dockerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.host, "docker-host", "", "runtime docker: the engine's address (default $DOCKER_HOST, else unix:///var/run/docker.sock)")
	fs.StringVar(&f.runtime, "docker-runtime", "", "runtime docker: the engine's OCI runtime for sandboxes of the runc tier (default: the engine's default runtime)")
	fs.StringVar(&f.runscRuntime, "docker-runsc-runtime", "runsc", `runtime docker: the engine's runtime (a daemon.json "runtimes" entry, with "runtimeArgs": ["--network=host"]) for sandboxes of the runsc tier (--isolation)`)
	fs.BoolVar(&f.remote, "docker-remote", false, "runtime docker: the engine is on another machine (implied by a tcp:// or ssh:// host): copy the corral binary in, publish execd")
	fs.StringVar(&f.publishIP, "docker-publish-ip", "127.0.0.1", "runtime docker, remote engines: the address execd ports are published on")
	fs.StringVar(&f.snapshotLimit, "docker-snapshot-limit", "8Gi", "runtime docker: the most a snapshot may write (the engine writes a sandbox's sparse files in full)")
}

// snapshotless is implemented by the runtimes that take no snapshots and
// mount no host volumes, to tell users why.
type snapshotless interface {
	noSnapshots() string
	noHostVolumes() string
}

// unsizedVolumes is a runtime whose named volumes have no size of their
// own; it says why, for users.
type unsizedVolumes interface {
	noVolumeSize() string
}

// noVolumeSize implements unsizedVolumes.
func (f *dockerFlags) noVolumeSize() string {
	return "the docker runtime's named volumes are the engine's local volumes, which have no size"
}

// kubeFlags are the kubernetes runtime's.
type kubeFlags struct {
	kubeconfig, namespace, records, endpoints, pullPolicy string
	storageClass, volumeSize                              string
	// volumeBytes is volumeSize, checked.
	volumeBytes int64
}

func (f *kubeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "runtime kubernetes: kubeconfig file (default $KUBECONFIG, ~/.kube/config, or the pod's service account)")
	fs.StringVar(&f.namespace, "kube-namespace", "default", "runtime kubernetes: the namespace of the Sandbox resources")
	fs.StringVar(&f.records, "kube-records", "cluster", "runtime kubernetes: where sandbox records are kept: cluster (Secrets in --kube-namespace; replicas with one --server-id share them and the server is stateless) or local (this data dir)")
	fs.StringVar(&f.endpoints, "kube-endpoints", "auto", "runtime kubernetes: how sandbox ports are reached: pod (addresses; in the cluster or on a node), port-forward (through the API server), auto (pod in a cluster, else port-forward)")
	fs.StringVar(&f.pullPolicy, "kube-image-pull-policy", "", "runtime kubernetes: pull policy of sandbox images (Always, IfNotPresent, Never; default: the cluster's)")
	fs.StringVar(&f.storageClass, "kube-storage-class", "", "runtime kubernetes: storage class of the claims named volumes make when a create names none (default: the cluster's default class)")
	fs.StringVar(&f.volumeSize, "kube-volume-size", "1Gi", "runtime kubernetes: the storage a named volume's claim requests when a create gives no pvc.storage")
}

// kubeRuntime is the kubernetes runtime's name (kube.Name), known also
// in builds without it, so that asking for it explains itself.
const kubeRuntime = "kubernetes"

// noSnapshots implements snapshotless. A pod's writable layer is its
// node's container runtime's, which the Kubernetes API neither copies nor
// commits; the kubelet's checkpoint API needs CRIU on the node, and
// Debian's CRIU fails on this kernel.
func (f *kubeFlags) noSnapshots() string {
	return "a pod's file system belongs to its node's container runtime, which the Kubernetes API cannot copy; " +
		"use the oci or docker runtime for snapshots and forks"
}

// noHostVolumes implements snapshotless.
func (f *kubeFlags) noHostVolumes() string {
	return "a host path would be a node's, which the server cannot check; use a pvc volume"
}

func (f *kubeFlags) check(l model.Limits) error {
	if f.records != "cluster" && f.records != "local" {
		return fmt.Errorf("--kube-records %q: want cluster or local", f.records)
	}
	n, err := model.ParseBytes(f.volumeSize)
	if err != nil || n < 4<<20 {
		return fmt.Errorf("--kube-volume-size %q: want a size of at least 4Mi, such as 1Gi", f.volumeSize)
	}
	f.volumeBytes = n
	if l.Default.Pids > 0 {
		return errors.New("--default-pids: the kubernetes runtime cannot limit one sandbox's processes; the nodes' kubelet limits every pod's (podPidsLimit)")
	}
	if kubeBuild.check == nil {
		return errNoKube
	}
	return kubeBuild.check(f)
}

func (f *kubeFlags) driver(h runtimeHost) (driver.Driver, error) {
	if kubeBuild.driver == nil {
		return nil, errNoKube
	}
	return kubeBuild.driver(f, h)
}

func (f *kubeFlags) stores(ctx context.Context, h runtimeHost) (*clusterStores, bool, error) {
	if f.records != "cluster" {
		return nil, false, nil
	}
	if kubeBuild.stores == nil {
		return nil, false, errNoKube
	}
	cs, err := kubeBuild.stores(ctx, f, h)
	return cs, err == nil, err
}

// kubeSupport is what a build with -tags kube adds (kube.go); in other
// builds it is the zero value, and each use explains why it is missing.
type kubeSupport struct {
	check      func(*kubeFlags) error
	driver     func(*kubeFlags, runtimeHost) (driver.Driver, error)
	stores     func(context.Context, *kubeFlags, runtimeHost) (*clusterStores, error)
	controller func(ctx context.Context, e *env, args []string) int
}

// errNoKube explains why this build has no Kubernetes support: linking
// client-go and controller-runtime costs every corral process about 14 ms
// and 20 MB at start, sandboxes' init and execd included
// (docs/architecture.md, "Two builds").
var errNoKube = errors.New("this corral was built without Kubernetes support; build it with 'go build -tags kube ./cmd/corral' (or use the corral-kube image)")

func runController(ctx context.Context, e *env, args []string) int {
	if kubeBuild.controller == nil {
		return client.Fail(e, "controller: %v", errNoKube)
	}
	return kubeBuild.controller(ctx, e, args)
}

// fakeFlags are the fake runtime's (tests).
type fakeFlags struct {
	createDelay time.Duration
}

func (f *fakeFlags) check(model.Limits) error { return nil }

func (f *fakeFlags) driver(h runtimeHost) (driver.Driver, error) {
	return fakedriver.New(fakedriver.Config{Dir: filepath.Join(h.dataDir, "fake"), CreateDelay: f.createDelay})
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
