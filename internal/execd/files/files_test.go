// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package files

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral/errdefs"
)

func TestResolve(t *testing.T) {
	t.Setenv("HOME", "/home/agent")
	t.Setenv("PROJECT", "demo")
	cases := map[string]string{
		"~":                  "/home/agent",
		"~/x/../y":           "/home/agent/y",
		"/tmp/$PROJECT/a":    "/tmp/demo/a",
		"/tmp/${PROJECT}/b/": "/tmp/demo/b",
		"/a//b/./c":          "/a/b/c",
	}
	for in, want := range cases {
		got, err := Resolve(in)
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a\x00b"} {
		if _, err := Resolve(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Resolve(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func FuzzResolve(f *testing.F) {
	for _, s := range []string{"~", "~/a", "$HOME/../x", "a/b", "/../../etc", "${X", "$", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := Resolve(p)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("Resolve(%q) error %v is not ErrInvalidArgument", p, err)
			}
			return
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got || strings.ContainsRune(got, 0) {
			t.Fatalf("Resolve(%q) = %q: not absolute and clean", p, got)
		}
	})
}

func TestModes(t *testing.T) {
	t.Parallel()
	for _, n := range []int{644, 755, 600, 4755, 1777, 0} {
		m, err := ParseMode(n)
		if err != nil || OctalDigits(m) != n {
			t.Errorf("ParseMode(%d) = %v, %v; back %d", n, m, err, OctalDigits(m))
		}
	}
	for _, bad := range []int{8, 999, 17777, -1} {
		if _, err := ParseMode(bad); err == nil {
			t.Errorf("ParseMode(%d) accepted", bad)
		}
	}
	if OctalDigits(fs.ModeDir|0o750) != 750 {
		t.Errorf("OctalDigits(dir 0750) = %d", OctalDigits(fs.ModeDir|0o750))
	}
}
