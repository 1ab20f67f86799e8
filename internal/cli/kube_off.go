// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !kube && linux

package cli

import (
	"context"
	"errors"
	"log/slog"

	"github.com/corral-dev/corral/internal/cli/client"
	"github.com/corral-dev/corral/internal/driver"
)

// errNoKube explains why this build has no Kubernetes support: linking
// client-go and controller-runtime costs every corral process about 14 ms
// and 20 MB at start, sandboxes' init and execd included
// (docs/architecture.md, "Two builds").
var errNoKube = errors.New("this corral was built without Kubernetes support; build it with 'go build -tags kube ./cmd/corral' (or use the corral-kube image)")

func kubeDriver(*serveConfig, *slog.Logger) (driver.Driver, error) { return nil, errNoKube }

func kubeCheckFlags(*serveConfig) error { return errNoKube }

func kubeStores(context.Context, *serveConfig, *slog.Logger) (kubeRecordStore, kubeKeyStore, error) {
	return nil, nil, errNoKube
}

func runController(_ context.Context, e *env, _ []string) int {
	return client.Fail(e, "controller: %v", errNoKube)
}
