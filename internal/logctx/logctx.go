// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package logctx carries request-scoped log attributes (request_id,
// sandbox_id) in a context and provides the one slog handler wrapper that
// adds them to every record logged with that context. Any internal package
// may import it; it imports only the standard library.
package logctx

import (
	"context"
	"log/slog"
)

type attrsKey struct{}

// With returns a context whose log records carry attrs in addition to those
// already carried by ctx.
func With(ctx context.Context, attrs ...slog.Attr) context.Context {
	prev, _ := ctx.Value(attrsKey{}).([]slog.Attr)
	merged := make([]slog.Attr, 0, len(prev)+len(attrs))
	merged = append(merged, prev...)
	merged = append(merged, attrs...)
	return context.WithValue(ctx, attrsKey{}, merged)
}

// Attrs returns the attributes carried by ctx.
func Attrs(ctx context.Context) []slog.Attr {
	a, _ := ctx.Value(attrsKey{}).([]slog.Attr)
	return a
}

// Handler wraps another handler and adds the attributes carried by the
// record's context.
type Handler struct {
	inner slog.Handler
}

// NewHandler wraps inner.
func NewHandler(inner slog.Handler) *Handler { return &Handler{inner: inner} }

// Enabled reports whether the inner handler handles level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// Handle adds the context's attributes and passes the record on. An
// attribute the record has itself is not added again from the context:
// a key appears once in a record.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	attrs := Attrs(ctx)
	if len(attrs) == 0 {
		return h.inner.Handle(ctx, r)
	}
	own := make(map[string]bool, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool { own[a.Key] = true; return true })
	r = r.Clone()
	for _, a := range attrs {
		if !own[a.Key] {
			own[a.Key] = true
			r.AddAttrs(a)
		}
	}
	return h.inner.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{inner: h.inner.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{inner: h.inner.WithGroup(name)}
}

// Discard returns a logger that drops everything; for tests and defaults.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
