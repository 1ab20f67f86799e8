// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package logctx

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"testing/slogtest"
)

// The wrapper is a handler like any other: slog's own conformance test.
func TestHandlerIsASlogHandler(t *testing.T) {
	var buf bytes.Buffer
	slogtest.Run(t, func(*testing.T) slog.Handler {
		buf.Reset()
		return NewHandler(slog.NewJSONHandler(&buf, nil))
	}, func(t *testing.T) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		return m
	})
}

// A record carries the context's attributes, and each key once: one the
// record has itself is not added again.
func TestContextAttributesOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil)))
	ctx := With(context.Background(), slog.String("request_id", "r1"), slog.String("sandbox_id", "sb-1"))
	log.InfoContext(ctx, "one", "sandbox_id", "sb-1", "n", 1)
	log.InfoContext(ctx, "two")
	log.Info("three")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %q", len(lines), lines)
	}
	for i, want := range []string{`"request_id":"r1"`, `"request_id":"r1"`, ""} {
		if n := strings.Count(lines[i], `"sandbox_id"`); (want != "") != (n == 1) || n > 1 {
			t.Errorf("line %d has sandbox_id %d times: %s", i+1, n, lines[i])
		}
		if want != "" && strings.Count(lines[i], want) != 1 {
			t.Errorf("line %d lacks %s once: %s", i+1, want, lines[i])
		}
	}
}
