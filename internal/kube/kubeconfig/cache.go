// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package kubeconfig

import (
	"context"
	"log/slog"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// StartCache runs ca until stop is called and waits up to a minute for it
// to fill; if it does not, it is stopped and the error is unavailable,
// with hint saying what to check. stop waits for the cache to end.
func StartCache(ctx context.Context, ca cache.Cache, log *slog.Logger, hint string) (stop func(), err error) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ca.Start(runCtx); err != nil && log != nil {
			log.ErrorContext(ctx, "kube: a cache stopped", "err", err)
		}
	}()
	stop = func() { cancel(); <-done }
	syncCtx, cancelSync := context.WithTimeout(ctx, time.Minute)
	defer cancelSync()
	if !ca.WaitForCacheSync(syncCtx) {
		stop()
		return nil, errdefs.New(errdefs.ErrUnavailable, api.CodeSandboxRuntimeUnavailable, hint)
	}
	return stop, nil
}
