// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package kubeconfig is how corral's Kubernetes commands connect: it finds
// the cluster the controller and the kube driver talk to (an explicit
// kubeconfig file, else $KUBECONFIG or ~/.kube/config, else the pod's
// in-cluster service account), points the client libraries' global
// loggers at corral's, and checks the pull-policy flags. Imported by
// internal/cli, so that the CLI itself names no Kubernetes package.
package kubeconfig

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Load returns the client configuration; path may be empty.
func Load(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	if path == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		if _, err := os.Stat(clientcmd.RecommendedHomeFile); err != nil {
			cfg, err := rest.InClusterConfig()
			if err != nil {
				return nil, err
			}
			return tuned(cfg), nil
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, errors.New("no Kubernetes cluster configured: pass --kubeconfig, set $KUBECONFIG, or run in a pod")
		}
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return tuned(cfg), nil
}

// tuned raises client-go's client-side rate limit (5 requests a second,
// bursts of 10), which a server's records, event log and webhook outbox
// outgrow at once: a replica waited over a second for a read under a
// burst of creates. The API server's priority and fairness still bound
// what one client takes.
func tuned(cfg *rest.Config) *rest.Config {
	cfg.UserAgent = "corral"
	cfg.QPS, cfg.Burst = 100, 200
	return cfg
}

// SetGlobalLoggers points the loggers that client-go (klog) and
// controller-runtime keep in package globals at log. Only the commands
// call it.
func SetGlobalLoggers(log *slog.Logger) {
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	klog.SetSlogLogger(log)
}

// PullPolicy checks an image pull policy flag; empty is the cluster's
// default.
func PullPolicy(s string) (corev1.PullPolicy, error) {
	switch p := corev1.PullPolicy(s); p {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		return p, nil
	}
	return "", fmt.Errorf("%q: want Always, IfNotPresent or Never", s)
}
