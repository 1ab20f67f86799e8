// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/logctx"
)

// newLogger builds the one logger of a process: JSON in production, text on
// a terminal, with request and sandbox attributes from the context.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: errorDetail}
	if format == "auto" {
		format = "json"
		if isTerminal(w) {
			format = "text"
		}
	}
	var h slog.Handler
	switch format {
	case "json":
		h = slog.NewJSONHandler(w, opts)
	case "text":
		h = slog.NewTextHandler(w, opts)
	default:
		return nil, fmt.Errorf("log format %q: want json, text or auto", format)
	}
	return slog.New(logctx.NewHandler(h)), nil
}

// errorDetail logs an error with the causes that user-facing errors keep
// out of their message (errdefs.Detail): a log line is where the detail
// a response leaves out is found.
func errorDetail(_ []string, a slog.Attr) slog.Attr {
	if err, ok := a.Value.Any().(error); ok && a.Value.Kind() == slog.KindAny {
		return slog.String(a.Key, errdefs.Detail(err))
	}
	return a
}

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	_, ok := terminalFD(w)
	return ok
}
