// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

//go:build kube && linux

package cli

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/corral-dev/corral/internal/cli/client"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/kube"
	"github.com/corral-dev/corral/internal/egress/dnsproxy"
	"github.com/corral-dev/corral/internal/egress/launch"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/kube/controller"
	"github.com/corral-dev/corral/internal/kube/kubeconfig"
	"github.com/corral-dev/corral/internal/kube/records"
)

func runKubeController(ctx context.Context, e *env, args []string) int {
	fs := client.NewFlagSet(e, "controller", "controller [flags]")
	kc := fs.String("kubeconfig", "", "kubeconfig file (default $KUBECONFIG, ~/.kube/config, or the pod's service account)")
	ns := fs.String("namespace", "", "reconcile Sandboxes in this namespace only (default: all)")
	image := fs.String("corral-image", "", "image whose /corral is this corral binary; sandbox pods copy it in (required)")
	pull := fs.String("corral-image-pull-policy", "IfNotPresent", "pull policy of --corral-image: Always, IfNotPresent or Never")
	leader := fs.Bool("leader-elect", false, "elect one active replica through a Lease (run several for availability)")
	leaderNS := fs.String("leader-elect-namespace", "", "namespace of the Lease (default --namespace)")
	metrics := fs.String("metrics-addr", "0", "serve Prometheus metrics on this address (0: off)")
	health := fs.String("health-addr", "", "serve /healthz and /readyz on this address (empty: off)")
	workers := fs.Int("workers", 4, "Sandboxes reconciled at once")
	egressUp := fs.String("egress-upstream", "", "resolvers (ip:port, comma-separated) that egress sidecars forward allowed names to (default: this process's /etc/resolv.conf, the cluster DNS in a pod)")
	egressDeny := fs.String("egress-deny", "", "CIDRs (comma-separated) no sandbox with a network policy may reach whatever its policy: nodes, pod and service ranges, the API server")
	userNS := fs.Bool("pod-user-namespaces", false, "give sandbox pods a user namespace of their own (hostUsers: false): root in a sandbox is not root on the node; the nodes' container runtime must support it")
	egressAllowPrivate := fs.String("egress-allow-private", "", "parts of the private ranges (RFC 1918, 100.64.0.0/10, 198.18.0.0/15, fc00::/7) sandboxes may reach when their policy allows, comma-separated CIDRs (default: none)")
	logFormat := fs.String("log-format", "json", "log format: json or text")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if ok, code := client.ParseFlags(fs, e, args); !ok {
		return code
	}
	if *image == "" {
		return client.Fail(e, "controller: --corral-image is required (an image with this corral binary at /corral)")
	}
	pullPolicy, err := kubeconfig.PullPolicy(*pull)
	if err != nil {
		return client.Fail(e, "controller: --corral-image-pull-policy: %v", err)
	}
	upstreams := policy.SplitList(*egressUp)
	for _, u := range upstreams {
		if ap, err := netip.ParseAddrPort(u); err != nil || ap.Addr().IsLoopback() {
			return client.Fail(e, "controller: --egress-upstream %q: want ip:port of a resolver the pods can reach (not loopback)", u)
		}
	}
	if len(upstreams) == 0 {
		// A loopback resolver of this host means nothing in a pod.
		upstreams = dnsproxy.Reachable(dnsproxy.SystemResolvers())
	}
	deny := policy.SplitList(*egressDeny)
	for _, d := range deny {
		if _, err := netip.ParsePrefix(d); err != nil {
			return client.Fail(e, "controller: --egress-deny %q: want a CIDR", d)
		}
	}
	allowPrivate, err := policy.ParseAllowPrivate(*egressAllowPrivate)
	if err != nil {
		return client.Fail(e, "controller: --egress-allow-private: %v", err)
	}
	log, err := client.NewLogger(e.Stderr, *logFormat, *logLevel)
	if err != nil {
		return client.Fail(e, "%v", err)
	}
	kubeconfig.SetGlobalLoggers(log)
	if len(upstreams) == 0 {
		log.WarnContext(ctx, "no resolver for egress sidecars (--egress-upstream): sandboxes with a network policy resolve nothing")
	}
	rc, err := kubeconfig.Load(*kc)
	if err != nil {
		return client.Fail(e, "controller: %v", err)
	}
	err = controller.Run(ctx, rc, controller.Config{
		Namespace: *ns, CorralImage: *image, CorralImagePullPolicy: pullPolicy, LeaderElection: *leader,
		LeaderElectionNamespace: *leaderNS, MetricsAddr: *metrics, HealthAddr: *health, Workers: *workers, Logger: log,
		EgressUpstreams: upstreams, EgressDeny: deny, EgressAllowPrivate: launch.JoinPrefixes(allowPrivate),
		UserNamespaces: *userNS,
	})
	if err != nil {
		return client.Fail(e, "controller: %v", err)
	}
	return 0
}

// kubeBuild is what this build adds for the kubernetes runtime.
var kubeBuild = kubeSupport{check: kubeCheck, driver: kubeDriver, stores: kubeStores, controller: runKubeController}

// kubeCheck reports a mistaken --kube-* flag before anything dials the
// cluster.
func kubeCheck(f *kubeFlags) error {
	if _, err := kubeconfig.PullPolicy(f.pullPolicy); err != nil {
		return fmt.Errorf("--kube-image-pull-policy: %w", err)
	}
	if c := f.storageClass; c != "" && len(validation.IsDNS1123Subdomain(c)) > 0 {
		return fmt.Errorf("--kube-storage-class %q: %s", c, strings.Join(validation.IsDNS1123Subdomain(c), "; "))
	}
	switch f.endpoints {
	case "", kube.EndpointsAuto, kube.EndpointsPod, kube.EndpointsPortForward:
		return nil
	}
	return fmt.Errorf("--kube-endpoints %q: want %s, %s or %s", f.endpoints, kube.EndpointsAuto, kube.EndpointsPod, kube.EndpointsPortForward)
}

// kubeStores opens what `serve --runtime kubernetes` keeps in the
// cluster, shared by the replicas with this server ID: sandbox records
// (with the published event log and admission claims), API keys, quota
// overrides, templates and webhook subscriptions.
func kubeStores(ctx context.Context, f *kubeFlags, h runtimeHost) (*clusterStores, error) {
	kubeconfig.SetGlobalLoggers(h.log)
	rc, err := kubeconfig.Load(f.kubeconfig)
	if err != nil {
		return nil, err
	}
	rcfg := records.Config{REST: rc, Namespace: f.namespace, ServerID: h.serverID, Logger: h.log}
	var closers []io.Closer
	cs := &clusterStores{close: func() {
		for _, c := range slices.Backward(closers) {
			c.Close()
		}
	}}
	fail := func(what string, err error) (*clusterStores, error) {
		cs.close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	keys, err := records.NewKeys(ctx, rcfg)
	if err != nil {
		return fail("API keys", err)
	}
	closers, cs.keys = append(closers, keys), keys
	recs, err := records.New(ctx, rcfg)
	if err != nil {
		return fail("records", err)
	}
	closers, cs.recs = append(closers, recs), recs
	quotas, err := records.NewQuotas(ctx, rcfg)
	if err != nil {
		return fail("quota overrides", err)
	}
	closers, cs.quotas = append(closers, quotas), quotas
	templates, err := records.NewTemplates(ctx, rcfg)
	if err != nil {
		return fail("templates", err)
	}
	closers, cs.templates = append(closers, templates), templates
	hooks, err := records.NewWebhooks(ctx, rcfg)
	if err != nil {
		return fail("webhooks", err)
	}
	closers, cs.webhooks = append(closers, hooks), hooks
	h.log.InfoContext(ctx, "sandbox records, events, API keys, quotas, templates and webhooks are kept in the cluster",
		"namespace", f.namespace, "server_id", h.serverID)
	return cs, nil
}

// kubeDriver is the kubernetes runtime of `serve`.
func kubeDriver(f *kubeFlags, h runtimeHost) (driver.Driver, error) {
	policy, err := kubeconfig.PullPolicy(f.pullPolicy)
	if err != nil {
		return nil, fmt.Errorf("--kube-image-pull-policy: %w", err)
	}
	kubeconfig.SetGlobalLoggers(h.log)
	rc, err := kubeconfig.Load(f.kubeconfig)
	if err != nil {
		return nil, err
	}
	return kube.New(context.Background(), kube.Config{REST: rc, Namespace: f.namespace, ImagePullPolicy: policy,
		Endpoints: f.endpoints, ServerID: h.serverID, StorageClass: f.storageClass, VolumeSize: f.volumeBytes, Logger: h.log})
}
