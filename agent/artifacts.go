// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sdk"
)

// maxArtifactBytes bounds what one pull copies out.
const maxArtifactBytes = 256 << 20

// workFiles is what a pull reads of the sandbox: an [sdk.Sandbox]. What
// it answers comes from inside the sandbox and is treated as hostile.
type workFiles interface {
	Search(ctx context.Context, dir, pattern string) ([]api.FileInfo, error)
	Download(ctx context.Context, path string, w io.Writer) (int64, error)
}

// pull copies the work directory's files into OutDir and lists them in
// the report.
func (r *run) pull(ctx context.Context) error {
	sb, err := r.cfg.Client.Sandbox(ctx, r.rep.SandboxID, sdk.SandboxOptions{})
	if err != nil {
		return err
	}
	arts, err := pullArtifacts(ctx, sb, r.cfg.Policy.Template.Workdir, r.cfg.OutDir, maxArtifactBytes, r.traj)
	attribute(arts, r.inputs, r.evidence)
	r.rep.Artifacts = append(r.rep.Artifacts, arts...)
	return err
}

// pullArtifacts copies the files under wd into outDir, which they cannot
// leave (a name with .. or a symlink in outDir does not lead out), up to
// limit bytes in all; a file that would pass the limit is skipped, by the
// size the search reported or, for a file larger than that (one that grew,
// or a sandbox that lies), by what its download brings. It returns what it
// copied, also when it stops at an error.
func pullArtifacts(ctx context.Context, files workFiles, wd, outDir string, limit int64, traj *trajectory) ([]Artifact, error) {
	infos, err := files.Search(ctx, wd, "*")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(outDir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var arts []Artifact
	var total int64
	for _, fi := range infos {
		if fi.Type == "directory" {
			continue
		}
		rel, ok := artifactPath(wd, fi.Path)
		if !ok {
			continue
		}
		if total+fi.Size > limit {
			traj.write(map[string]any{"type": "artifact", "path": fi.Path, "skipped": "over the 256 MiB pull limit"})
			continue
		}
		a, err := pullArtifact(ctx, files, root, fi.Path, rel, limit-total)
		if errors.Is(err, errOverLimit) {
			traj.write(map[string]any{"type": "artifact", "path": fi.Path, "skipped": "over the 256 MiB pull limit"})
			continue
		}
		if err != nil {
			return arts, err
		}
		a.Local = filepath.Join(outDir, filepath.FromSlash(rel))
		a.ModifiedAt = fi.ModifiedAt
		total += a.Bytes
		arts = append(arts, a)
		traj.write(map[string]any{"type": "artifact", "path": a.Path, "local": a.Local, "bytes": a.Bytes, "sha256": a.SHA256})
	}
	return arts, nil
}

// artifactPath is where the file at p (as the sandbox named it) goes,
// relative to the out directory: its path under wd. ok is false for a
// path that is not under wd, however it is spelled.
func artifactPath(wd, p string) (rel string, ok bool) {
	clean := path.Clean(p)
	rel = strings.TrimPrefix(clean, strings.TrimSuffix(wd, "/")+"/")
	if rel == clean || rel == "" || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

// pullArtifact downloads the file at p to rel under root. A file larger
// than budget is removed again, and the error is errOverLimit.
func pullArtifact(ctx context.Context, files workFiles, root *os.Root, p, rel string, budget int64) (Artifact, error) {
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return Artifact{}, err
		}
	}
	f, err := root.OpenFile(rel, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return Artifact{}, err
	}
	h := sha256.New()
	n, err := files.Download(ctx, p, &limitWriter{w: io.MultiWriter(f, h), n: budget})
	f.Close()
	if errors.Is(err, errOverLimit) {
		_ = root.Remove(rel)
	}
	if err != nil {
		return Artifact{}, err
	}
	return Artifact{Path: p, Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// errOverLimit ends a download that would take a pull past its limit.
var errOverLimit = errors.New("over the pull limit")

// limitWriter passes on at most n bytes; a write that would pass more
// fails with errOverLimit.
type limitWriter struct {
	w io.Writer
	n int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		return 0, errOverLimit
	}
	n, err := l.w.Write(p)
	l.n -= int64(n)
	return n, err
}
