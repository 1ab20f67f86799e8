// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-dev/corral/api"
)

// fakeFiles is a sandbox's work directory as its search and download
// answer: what a hostile sandbox says, not what is there.
type fakeFiles struct {
	infos   []api.FileInfo
	content map[string]string
	// downloaded lists the paths asked for, in order.
	downloaded []string
}

func (f *fakeFiles) Search(_ context.Context, dir, pattern string) ([]api.FileInfo, error) {
	if dir != "/workspace" || pattern != "*" {
		return nil, fmt.Errorf("search %s %s: want /workspace *", dir, pattern)
	}
	return f.infos, nil
}

func (f *fakeFiles) Download(_ context.Context, p string, w io.Writer) (int64, error) {
	f.downloaded = append(f.downloaded, p)
	c, ok := f.content[p]
	if !ok {
		return 0, fmt.Errorf("download %s: no such file", p)
	}
	n, err := io.WriteString(w, c)
	return int64(n), err
}

// file is a regular file the fake lists with its true size.
func (f *fakeFiles) file(p, content string) *fakeFiles {
	f.infos = append(f.infos, api.FileInfo{Path: p, Type: "file", Size: int64(len(content))})
	if f.content == nil {
		f.content = map[string]string{}
	}
	f.content[p] = content
	return f
}

// trajectoryLines decodes what a trajectory wrote.
func trajectoryLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for l := range strings.Lines(buf.String()) {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("trajectory line %q: %v", l, err)
		}
		delete(ev, "time")
		out = append(out, ev)
	}
	return out
}

// treeOf lists the files under dir with their contents.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		tree[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func TestArtifactPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		wd, p  string
		want   string
		wantOK bool
	}{
		{"/workspace", "/workspace/report.md", "report.md", true},
		{"/workspace/", "/workspace/report.md", "report.md", true},
		{"/workspace", "/workspace/out/chart.png", "out/chart.png", true},
		{"/workspace", "/workspace/./out//chart.png", "out/chart.png", true},
		{"/workspace", "/workspace/../workspace/a", "a", true},
		{"/workspace", "/workspace", "", false},
		{"/workspace", "/etc/passwd", "", false},
		{"/workspace", "/workspace2/x", "", false},
		{"/workspace", "report.md", "", false},
		{"/workspace", "/workspace/../etc/passwd", "", false},
		{"/workspace", "/workspace/sub/../../escape.txt", "", false},
		{"/workspace", "/workspace/", "", false},
		{"/workspace", "../report.md", "", false},
		{"/", "/etc/passwd", "etc/passwd", true},
	} {
		got, ok := artifactPath(tc.wd, tc.p)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("artifactPath(%q, %q) = %q, %v; want %q, %v", tc.wd, tc.p, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestPullArtifacts(t *testing.T) {
	t.Parallel()
	files := (&fakeFiles{}).file("/workspace/report.md", "# findings\n").file("/workspace/out/data.csv", "a,b\n1,2\n").
		file("/etc/shadow", "root:x")
	files.infos = append(files.infos, api.FileInfo{Path: "/workspace/out", Type: "directory"})
	out := filepath.Join(t.TempDir(), "out")
	var buf bytes.Buffer
	arts, err := pullArtifacts(t.Context(), files, "/workspace", out, maxArtifactBytes, &trajectory{w: &buf})
	if err != nil {
		t.Fatal(err)
	}
	want := []Artifact{
		{Path: "/workspace/report.md", Local: filepath.Join(out, "report.md"), Bytes: 11, SHA256: sha("# findings\n")},
		{Path: "/workspace/out/data.csv", Local: filepath.Join(out, "out", "data.csv"), Bytes: 8, SHA256: sha("a,b\n1,2\n")},
	}
	if diff := cmp.Diff(want, arts); diff != "" {
		t.Errorf("artifacts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"report.md": "# findings\n", "out/data.csv": "a,b\n1,2\n"}, treeOf(t, out)); diff != "" {
		t.Errorf("the out directory (-want +got):\n%s", diff)
	}
	if slices.Contains(files.downloaded, "/etc/shadow") {
		t.Errorf("a file outside the work directory was downloaded: %v", files.downloaded)
	}
	var traj []map[string]any
	for _, a := range want {
		traj = append(traj, map[string]any{"type": "artifact", "path": a.Path, "local": a.Local, "bytes": float64(a.Bytes), "sha256": a.SHA256})
	}
	if diff := cmp.Diff(traj, trajectoryLines(t, &buf)); diff != "" {
		t.Errorf("trajectory (-want +got):\n%s", diff)
	}
}

// Files that together pass the limit: those that would take the total
// over it are skipped (and the trajectory says so), smaller ones after
// them still fit.
func TestPullArtifactsLimit(t *testing.T) {
	t.Parallel()
	files := (&fakeFiles{}).file("/workspace/a", "123456").file("/workspace/b", "123456").file("/workspace/c", "1234")
	out := t.TempDir()
	var buf bytes.Buffer
	arts, err := pullArtifacts(t.Context(), files, "/workspace", out, 10, &trajectory{w: &buf})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range arts {
		got = append(got, a.Path)
	}
	if want := []string{"/workspace/a", "/workspace/c"}; !slices.Equal(got, want) {
		t.Errorf("pulled %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(out, "b")); err == nil {
		t.Errorf("the skipped file is in the out directory")
	}
	skipped := map[string]any{"type": "artifact", "path": "/workspace/b", "skipped": "over the 256 MiB pull limit"}
	if lines := trajectoryLines(t, &buf); len(lines) != 3 || !cmp.Equal(lines[1], skipped) {
		t.Errorf("trajectory = %v, want the skip of b second", lines)
	}
}

// Names and links that try to lead out of the out directory: whatever
// the pull does with them, nothing is written outside it.
func TestPullArtifactsStayInOutDir(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// prepare readies the out directory, given a directory beside it.
		prepare func(t *testing.T, out, outside string)
		path    string
	}{
		{"dot-dot in a name", nil, "/workspace/../../escape.txt"},
		{"dot-dot after a directory", nil, "/workspace/sub/../../../escape.txt"},
		{"a directory linked outside", func(t *testing.T, out, outside string) {
			if err := os.Symlink(outside, filepath.Join(out, "sub")); err != nil {
				t.Fatal(err)
			}
		}, "/workspace/sub/escape.txt"},
		{"a file linked outside", func(t *testing.T, out, outside string) {
			if err := os.Symlink(filepath.Join(outside, "escape.txt"), filepath.Join(out, "escape.txt")); err != nil {
				t.Fatal(err)
			}
		}, "/workspace/escape.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			out, outside := filepath.Join(base, "out", "deeper"), filepath.Join(base, "outside")
			for _, d := range []string{out, outside} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tc.prepare != nil {
				tc.prepare(t, out, outside)
			}
			files := (&fakeFiles{}).file(tc.path, "pwned")
			arts, err := pullArtifacts(t.Context(), files, "/workspace", out, maxArtifactBytes, &trajectory{})
			if tc.prepare == nil && err != nil {
				t.Errorf("a name that leads out is not skipped: %v", err)
			}
			t.Logf("pull: %v", err)
			if len(arts) != 0 {
				t.Errorf("pulled %v", arts)
			}
			for _, dir := range []string{outside, filepath.Join(base, "out"), base} {
				entries, _ := os.ReadDir(dir)
				for _, e := range entries {
					if e.Name() == "escape.txt" && e.Type().IsRegular() {
						t.Errorf("%s was written outside the out directory", filepath.Join(dir, e.Name()))
					}
				}
			}
			if tree := treeOf(t, outside); len(tree) != 0 {
				t.Errorf("files outside the out directory: %v", tree)
			}
		})
	}
}

// A file larger than the search said (one that grew since, or a sandbox
// that lies about it) is bounded by the limit all the same: its download
// stops there, the part is removed, and the files after it still come.
func TestPullArtifactsLimitHoldsForAFileLargerThanListed(t *testing.T) {
	t.Parallel()
	files := (&fakeFiles{}).file("/workspace/a", "1234").file("/workspace/huge", "").file("/workspace/b", "5678")
	files.content["/workspace/huge"] = strings.Repeat("x", 1000)
	out := t.TempDir()
	var buf bytes.Buffer
	arts, err := pullArtifacts(t.Context(), files, "/workspace", out, 10, &trajectory{w: &buf})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range arts {
		got = append(got, a.Path)
	}
	if want := []string{"/workspace/a", "/workspace/b"}; !slices.Equal(got, want) {
		t.Errorf("pulled %v, want %v", got, want)
	}
	if diff := cmp.Diff(map[string]string{"a": "1234", "b": "5678"}, treeOf(t, out)); diff != "" {
		t.Errorf("the out directory (-want +got):\n%s", diff)
	}
	skipped := map[string]any{"type": "artifact", "path": "/workspace/huge", "skipped": "over the 256 MiB pull limit"}
	if lines := trajectoryLines(t, &buf); len(lines) != 3 || !cmp.Equal(lines[1], skipped) {
		t.Errorf("trajectory = %v, want the skip of huge second", lines)
	}
}

func TestLimitWriter(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := &limitWriter{w: &buf, n: 5}
	if n, err := w.Write([]byte("abc")); n != 3 || err != nil {
		t.Errorf("Write(abc) = %d, %v", n, err)
	}
	if n, err := w.Write([]byte("def")); n != 0 || !errors.Is(err, errOverLimit) {
		t.Errorf("Write past the limit = %d, %v; want 0, errOverLimit", n, err)
	}
	if n, err := w.Write([]byte("de")); n != 2 || err != nil {
		t.Errorf("Write(de) up to the limit = %d, %v", n, err)
	}
	if buf.String() != "abcde" {
		t.Errorf("written %q, want abcde", buf.String())
	}
}
