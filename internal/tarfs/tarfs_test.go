// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package tarfs

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/testutil"
)

func TestRoundTrip(t *testing.T) {
	src := t.TempDir()
	big := make([]byte, 3<<20)
	_, _ = rand.Read(big)
	must(t, os.MkdirAll(filepath.Join(src, "a/b/c"), 0o755))
	must(t, os.MkdirAll(filepath.Join(src, "empty"), 0o700))
	must(t, os.WriteFile(filepath.Join(src, "a/run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "a/b/secret"), []byte("s"), 0o600))
	must(t, os.WriteFile(filepath.Join(src, "a/b/c/big.bin"), big, 0o644))
	must(t, os.Symlink("../run.sh", filepath.Join(src, "a/b/run")))
	must(t, os.Symlink("/etc/hostname", filepath.Join(src, "abs-link")))
	must(t, os.Link(filepath.Join(src, "a/b/secret"), filepath.Join(src, "hard")))

	var buf bytes.Buffer
	ws, err := Write(&buf, src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "new", "dir")
	xs, err := Extract(&buf, dst, ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ws.Bytes != xs.Bytes || ws.Files != xs.Files || ws.Dirs != xs.Dirs || ws.Links != xs.Links || xs.Files != 3 || xs.Links != 3 {
		t.Errorf("written %+v, extracted %+v", ws, xs)
	}
	testutil.SameTree(t, src, dst)
	a, _ := os.Stat(filepath.Join(dst, "hard"))
	b, _ := os.Stat(filepath.Join(dst, "a/b/secret"))
	if !os.SameFile(a, b) {
		t.Error("the hard link was not kept")
	}
	// Extracting again over the result merges and replaces.
	buf.Reset()
	if _, err := Write(&buf, src); err != nil {
		t.Fatal(err)
	}
	if _, err := Extract(&buf, dst, ExtractOptions{}); err != nil {
		t.Fatalf("extract over an existing tree: %v", err)
	}
}

type entry struct {
	name, link string
	typ        byte
	body       string
}

func archive(t testing.TB, entries ...entry) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			_, _ = tw.Write([]byte(e.body))
		}
	}
	_ = tw.Close()
	return buf.Bytes()
}

func TestHostileArchivesStayInside(t *testing.T) {
	for name, entries := range map[string][]entry{
		"dot-dot":           {{name: "../escaped", typ: tar.TypeReg, body: "x"}},
		"deep dot-dot":      {{name: "a/../../escaped", typ: tar.TypeReg, body: "x"}},
		"absolute":          {{name: "/escaped", typ: tar.TypeReg, body: "x"}},
		"symlink then file": {{name: "l", link: "..", typ: tar.TypeSymlink}, {name: "l/escaped", typ: tar.TypeReg, body: "x"}},
		"absolute symlink":  {{name: "l", link: "OUTSIDE", typ: tar.TypeSymlink}, {name: "l/escaped", typ: tar.TypeReg, body: "x"}},
		"symlink dir":       {{name: "l", link: "OUTSIDE", typ: tar.TypeSymlink}, {name: "l/sub/", typ: tar.TypeDir}},
		"hard link out":     {{name: "h", link: "../escaped", typ: tar.TypeLink}},
		"write via link":    {{name: "l", link: "OUTSIDE/escaped", typ: tar.TypeSymlink}, {name: "l", typ: tar.TypeReg, body: "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			must(t, os.Mkdir(outside, 0o755))
			for i := range entries {
				entries[i].link = strings.ReplaceAll(entries[i].link, "OUTSIDE", outside)
			}
			target := filepath.Join(base, "target")
			// A file replacing a planted link is fine (the link is removed,
			// not followed); everything else is refused.
			if _, err := Extract(bytes.NewReader(archive(t, entries...)), target, ExtractOptions{}); !errors.Is(err, ErrBadArchive) && name != "write via link" {
				t.Errorf("extract = %v, want a bad-archive error", err)
			}
			if left := testutil.Tree(t, outside); len(left) != 1 {
				t.Errorf("the archive wrote outside the target: %v", left)
			}
			if _, err := os.Lstat(filepath.Join(base, "escaped")); err == nil {
				t.Error("the archive wrote next to the target")
			}
		})
	}
}

func FuzzExtract(f *testing.F) {
	f.Add(archive(f, entry{name: "a/b", typ: tar.TypeReg, body: "x"}, entry{name: "l", link: "/", typ: tar.TypeSymlink}))
	f.Add(archive(f, entry{name: "../x", typ: tar.TypeReg}, entry{name: "d/", typ: tar.TypeDir}))
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		target := filepath.Join(base, "target")
		_, _ = Extract(bytes.NewReader(data), target, ExtractOptions{})
		entries, err := os.ReadDir(base)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != "target" {
				t.Fatalf("extract created %s outside the target", e.Name())
			}
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
