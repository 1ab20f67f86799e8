// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package unixsock

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLongPaths(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "api.sock")
	if len(path) <= 108 {
		t.Fatalf("path %d bytes: not long enough to test", len(path))
	}
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = c.Write([]byte("hi"))
			c.Close()
		}
	}()
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if b, _ := io.ReadAll(c); string(b) != "hi" {
		t.Errorf("read %q", b)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the socket is not at its path: %v", err)
	}
}
