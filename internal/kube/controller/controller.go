// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package controller is `corral controller`: the controller-runtime
// reconcilers that turn corral's custom resources into Pods. A Sandbox
// becomes one Pod of the same name that it owns: an init container copies
// the corral binary from Config.CorralImage into an emptyDir, and the
// sandbox container runs `corral init -- ENTRYPOINT` from the user's image
// with execd on port 44772. The controller deletes Sandboxes whose
// expireTime passed (requeued for that moment, no polling), ends the
// entrypoint of a stopped Sandbox while keeping its pod for the exit
// status, and reports conditions a user can act on. Only internal/cli and
// the Kubernetes test tier (internal/kube/kubetest, which runs it in the
// test process) import it (internal/archtest checks).
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/sandbox"
)

// Labels the controller stamps on what it creates: internal/sandbox's
// keys, which every runtime's backend objects carry.
const (
	LabelSandboxID = sandbox.LabelSandboxID
	LabelManaged   = sandbox.LabelManaged
	LabelTenant    = sandbox.LabelTenant
)

// Config configures the controller.
type Config struct {
	// Namespace limits the controller to one namespace; empty means all.
	Namespace string
	// CorralImage is an image whose /corral is the corral binary (the
	// same version as the controller); the init container copies it.
	CorralImage string
	// CorralImagePullPolicy is the pull policy of CorralImage.
	CorralImagePullPolicy corev1.PullPolicy
	// LeaderElection lets several replicas run with one active.
	LeaderElection bool
	// LeaderElectionNamespace holds the lease; empty means Namespace.
	LeaderElectionNamespace string
	// LeaseDuration is how long a lost leader's lease stays valid (default
	// 15 s); renewals and retries scale with it. A replica that stops
	// cleanly gives the lease up at once.
	LeaseDuration time.Duration
	// MetricsAddr serves Prometheus metrics; empty or "0" disables.
	MetricsAddr string
	// HealthAddr serves /healthz and /readyz; empty disables.
	HealthAddr string
	// Workers is how many Sandboxes reconcile at once (default 4).
	Workers int
	// EgressUpstreams are the resolvers (ip:port) egress sidecars forward
	// allowed names to: the cluster's DNS.
	EgressUpstreams []string
	// EgressDeny are CIDRs no sandbox with an egress policy may reach,
	// whatever the policy: the nodes, the pod and service ranges, the API
	// server (link-local and metadata addresses always are).
	EgressDeny []string
	// UserNamespaces gives sandbox pods hostUsers: false (a user
	// namespace of their own: root in the pod is not root on the node);
	// the nodes' runtime must support it.
	UserNamespaces bool
	// EgressAllowPrivate are the parts of the private ranges sandboxes
	// may reach when their policy allows (comma-separated CIDRs; the
	// sidecar's --allow-private).
	EgressAllowPrivate string
	Logger             *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Run runs the controller until ctx ends.
func Run(ctx context.Context, rc *rest.Config, cfg Config) error {
	mgr, err := NewManager(rc, cfg)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// NewManager builds a manager with every reconciler registered, ready to
// Start.
func NewManager(rc *rest.Config, cfg Config) (ctrl.Manager, error) {
	if cfg.CorralImage == "" {
		return nil, errors.New("controller: the corral image is not set")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.MetricsAddr == "" {
		cfg.MetricsAddr = "0"
	}
	scheme, err := v1alpha1.Scheme()
	if err != nil {
		return nil, err
	}
	managed := labels.SelectorFromSet(labels.Set{LabelManaged: "true"})
	opts := ctrl.Options{
		Scheme:                        scheme,
		Logger:                        logr.FromSlogHandler(cfg.Logger.Handler()),
		Metrics:                       metricsserver.Options{BindAddress: cfg.MetricsAddr},
		HealthProbeBindAddress:        cfg.HealthAddr,
		LeaderElection:                cfg.LeaderElection,
		LeaderElectionID:              "corral-controller",
		LeaderElectionNamespace:       cfg.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		Cache: cache.Options{
			// Only our pods and secrets are cached, not the cluster's.
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Pod{}:    {Label: managed},
				&corev1.Secret{}: {Label: managed},
			},
		},
	}
	if d := cfg.LeaseDuration; d > 0 {
		renew, retry := d*2/3, d/5
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &d, &renew, &retry
	}
	if cfg.Namespace != "" {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{cfg.Namespace: {}}
		if opts.LeaderElectionNamespace == "" {
			opts.LeaderElectionNamespace = cfg.Namespace
		}
	}
	mgr, err := ctrl.NewManager(rc, opts)
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(context.Background(), &corev1.Pod{}, indexPool, poolName); err != nil {
		return nil, err
	}
	if err := idx.IndexField(context.Background(), &corev1.Pod{}, indexSandbox, sandboxName); err != nil {
		return nil, err
	}
	// Name validation guards controller-runtime's process-wide metrics
	// against two controllers of one name; tests run a manager per test in
	// one process.
	copts := controller.Options{MaxConcurrentReconciles: cfg.Workers, SkipNameValidation: ptr(true)}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Sandbox{}).
		Owns(&corev1.Pod{}).
		// A Sandbox's access Secret is written before the Sandbox, and
		// owned by it only after: it is matched by its label.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if id := o.GetLabels()[LabelSandboxID]; id != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: id}}}
			}
			return nil
		})).
		WithOptions(copts).
		Complete(&sandboxReconciler{client: mgr.GetClient(), api: mgr.GetAPIReader(),
			//lint:ignore SA1019 core/v1 Events are what kubectl describe shows for a pod's owner
			events: mgr.GetEventRecorderFor("corral-controller"), cfg: cfg})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.SandboxPool{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Secret{}).
		WithOptions(copts).
		Complete(&poolReconciler{client: mgr.GetClient(), cfg: cfg})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	if cfg.HealthAddr != "" {
		if err := mgr.AddHealthzCheck("ping", func(*http.Request) error { return nil }); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("ping", func(*http.Request) error { return nil }); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

func ptr[T any](v T) *T { return &v }
