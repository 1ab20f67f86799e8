// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package forward

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Await is the readiness poll of every runtime: it calls try until try
// reports ready, alive returns an error (the sandbox, or the process that
// was to answer, is gone: that error is returned), or ctx ends. try's
// error says why it is not ready yet; it ends nothing. Between tries
// Await pauses first, doubling up to most. At the end of ctx it returns
// ctx's cause, with try's last error beside it.
func Await(ctx context.Context, try func(context.Context) (bool, error), alive func(context.Context) error, first, most time.Duration) error {
	delay := first
	var last error
	for {
		ok, err := try(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if ctx.Err() != nil {
			return notReady(ctx, last)
		}
		if err := alive(ctx); err != nil {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return notReady(ctx, last)
		case <-t.C:
		}
		delay = min(delay*2, most)
	}
}

func notReady(ctx context.Context, last error) error {
	if last == nil {
		return context.Cause(ctx)
	}
	return fmt.Errorf("%w (the last try: %v)", context.Cause(ctx), last)
}

// AwaitPing pings execd over dial (Ping) until it answers; see Await.
func AwaitPing(ctx context.Context, dial Dialer, alive func(context.Context) error, first, most time.Duration) error {
	return Await(ctx, func(ctx context.Context) (bool, error) {
		ok, err := Ping(ctx, dial)
		if err == nil && !ok {
			err = errors.New("execd answered, but not 200")
		}
		return ok, err
	}, alive, first, most)
}
