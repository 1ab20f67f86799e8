// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/testutil"
)

// TestStageRefusesLinks: a link (or a file, or another user's directory)
// planted where the stage's directories, files or mount points go is
// refused, and nothing outside the stage is made, truncated, chmodded or
// mounted on.
func TestStageRefusesLinks(t *testing.T) {
	t.Parallel()
	type paths struct{ root, sandbox, outside, victim string }
	for _, tc := range []struct {
		name string
		// asRoot: the case chowns, which only root can.
		asRoot bool
		plant  func(t *testing.T, p paths)
		stage  func(p paths) error
	}{
		{
			name:  "the stage root is a link",
			plant: func(t *testing.T, p paths) { symlink(t, p.outside, p.root) },
			stage: func(p paths) error { return closed(openStage(p.root, p.sandbox)) },
		},
		{
			name: "a sandbox's directory is a link",
			plant: func(t *testing.T, p paths) {
				mkStage(t, p.root, filepath.Dir(p.sandbox))
				symlink(t, p.outside, p.sandbox)
			},
			stage: func(p paths) error { return closed(openStage(p.root, filepath.Join(p.sandbox, "binds"))) },
		},
		{
			name: "the binds directory is a link",
			plant: func(t *testing.T, p paths) {
				mkStage(t, p.root, p.sandbox)
				symlink(t, p.outside, filepath.Join(p.sandbox, "binds"))
			},
			stage: func(p paths) error {
				return stageFileIn(p.root, p.victim, filepath.Join(p.sandbox, "binds", "0"))
			},
		},
		{
			name: "a staged file is a link to a host file",
			plant: func(t *testing.T, p paths) {
				mkStage(t, p.root, filepath.Join(p.sandbox, "binds"))
				symlink(t, p.victim, filepath.Join(p.sandbox, "binds", "0"))
			},
			stage: func(p paths) error {
				return stageFileIn(p.root, p.victim, filepath.Join(p.sandbox, "binds", "0"))
			},
		},
		{
			name: "a volume's mount point is a link",
			plant: func(t *testing.T, p paths) {
				mkStage(t, p.root, filepath.Join(p.sandbox, "volumes"))
				symlink(t, p.outside, filepath.Join(p.sandbox, "volumes", "v"))
			},
			stage: func(p paths) error {
				dir, err := os.Open(p.outside)
				if err != nil {
					return err
				}
				defer dir.Close()
				return stageIdmappedIn(p.root, dir, filepath.Join(p.sandbox, "volumes", "v"), nil)
			},
		},
		{
			name: "a sandbox's root is a link",
			plant: func(t *testing.T, p paths) {
				mkStage(t, p.root, p.sandbox)
				symlink(t, p.outside, filepath.Join(p.sandbox, "root"))
			},
			stage: func(p paths) error { return closed(openAttachDir(p.root, filepath.Join(p.sandbox, "root"))) },
		},
		{
			name: "a directory in a sandbox's root is a link",
			plant: func(t *testing.T, p paths) {
				mkStage(t, p.root, p.sandbox)
				if err := os.Mkdir(filepath.Join(p.sandbox, "root"), 0o755); err != nil {
					t.Fatal(err)
				}
				symlink(t, p.outside, filepath.Join(p.sandbox, "root", "usr"))
			},
			stage: func(p paths) error {
				return closed(openAttachDir(p.root, filepath.Join(p.sandbox, "root", "usr", "lib")))
			},
		},
		{
			name: "a file where a directory goes",
			plant: func(t *testing.T, p paths) {
				mkStage(t, p.root, filepath.Dir(p.sandbox))
				if err := os.WriteFile(p.sandbox, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			stage: func(p paths) error { return makeStageAt(p.root, p.sandbox) },
		},
		{
			name:   "a directory of another user",
			asRoot: true,
			plant: func(t *testing.T, p paths) {
				mkStage(t, p.root, filepath.Dir(p.sandbox))
				if err := os.Mkdir(p.sandbox, 0o777); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(p.sandbox, 65534, 65534); err != nil {
					t.Fatal(err)
				}
			},
			stage: func(p paths) error { return makeStageAt(p.root, filepath.Join(p.sandbox, "binds")) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.asRoot {
				testutil.RequireRoot(t)
			}
			base := t.TempDir()
			p := paths{root: filepath.Join(base, "corral"), outside: filepath.Join(base, "outside")}
			p.sandbox = filepath.Join(p.root, "server", "sandbox")
			p.victim = filepath.Join(p.outside, "victim")
			if err := os.Mkdir(p.outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p.victim, []byte("host"), 0o600); err != nil {
				t.Fatal(err)
			}
			tc.plant(t, p)
			err := tc.stage(p)
			if err == nil {
				t.Fatalf("staging through what was planted: no error")
			}
			t.Logf("refused: %v", err)
			entries, _ := os.ReadDir(p.outside)
			if len(entries) != 1 || entries[0].Name() != "victim" {
				t.Errorf("the directory outside holds %v, want only victim", entries)
			}
			if fi, err := os.Stat(p.outside); err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("the directory outside: %v %v, want mode 0755", fi.Mode(), err)
			}
			if b, err := os.ReadFile(p.victim); err != nil || string(b) != "host" {
				t.Errorf("the host file holds %q (%v), want host", b, err)
			}
			if fi, err := os.Stat(p.victim); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("the host file: %v %v, want mode 0600", fi.Mode(), err)
			}
			if mountedUnder(t, base) {
				t.Errorf("something is mounted under %s", base)
			}
		})
	}
}

// TestStageDirectoriesAreRepaired: a stage directory of the server's
// with a loose mode is given 0711; the directory holding the stage must
// be the server's, let others pass and let only the server write.
func TestStageDirectoriesAreRepaired(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root := filepath.Join(base, "corral")
	if err := os.MkdirAll(filepath.Join(root, "server"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "server"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := makeStageAt(root, filepath.Join(root, "server", "sandbox")); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{root, filepath.Join(root, "server"), filepath.Join(root, "server", "sandbox")} {
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != stageMode {
			t.Errorf("%s: mode %v (%v), want %#o", dir, fi.Mode(), err, stageMode)
		}
	}
	if err := closed(openStage(root, filepath.Join(base, "elsewhere"))); err == nil {
		t.Errorf("openStage of a directory outside the stage: no error")
	}

	for _, tc := range []struct {
		name string
		mode os.FileMode
		want string // in the error; "" for none
	}{
		{"run", 0o755, ""},
		{"others may not pass", 0o750, "chmod o+x"},
		{"others may write", 0o777, "others than its owner may write"},
		{"its group may write", 0o775, "others than its owner may write"},
	} {
		parent := filepath.Join(base, "parent-"+strings.ReplaceAll(tc.name, " ", "-"))
		if err := os.Mkdir(parent, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(parent, tc.mode); err != nil {
			t.Fatal(err)
		}
		err := checkStageParent(filepath.Join(parent, "corral"))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("checkStageParent(%s, mode %#o) = %v, want %q", tc.name, tc.mode, err, tc.want)
		}
	}
	link := filepath.Join(base, "link")
	symlink(t, base, link)
	if err := checkStageParent(filepath.Join(link, "corral")); err == nil {
		t.Errorf("checkStageParent under a link: no error")
	}
}

// TestStageFileMountsTheFile: a staged file is the source's, reached
// only at the new file the stage made.
func TestStageFileMountsTheFile(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	base := t.TempDir()
	root := filepath.Join(base, "corral")
	src := filepath.Join(base, "hosts")
	if err := os.WriteFile(src, []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(root, "server", "sandbox", "binds", "0")
	if err := stageFileIn(root, src, target); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unmount(target) })
	if b, err := os.ReadFile(target); err != nil || string(b) != "127.0.0.1 localhost\n" {
		t.Errorf("the staged file holds %q (%v), want the source's", b, err)
	}
	if err := stageFileIn(root, src, target); err == nil {
		t.Errorf("staging over a staged file: no error")
	}
	if err := unmount(target); err != nil {
		t.Fatal(err)
	}
	if mountedUnder(t, base) {
		t.Errorf("something is still mounted under %s", base)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func mkStage(t *testing.T, root, dir string) {
	t.Helper()
	if err := makeStageAt(root, dir); err != nil {
		t.Fatal(err)
	}
}

func makeStageAt(root, dir string) error { return closed(openStage(root, dir)) }

func closed(f *os.File, err error) error {
	if err != nil {
		return err
	}
	return f.Close()
}

// mountedUnder reports whether a mount point is at or under dir.
func mountedUnder(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			return true
		}
	}
	return false
}
