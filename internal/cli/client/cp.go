// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/tarfs"
	"github.com/corral-dev/corral/sdk"
)

const cpSynopsis = `cp [-q] SRC DST

  corral cp ./data.csv ID:/work/          upload a file (into a directory: keeps its name)
  corral cp ./project ID:/work/project    upload a directory tree (one tar stream)
  corral cp ID:/work/out.json .           download a file
  corral cp ID:/work/results ./results    download a directory tree
  corral cp - ID:/work/in.txt             upload stdin;  corral cp ID:/work/x -  download to stdout
                                          (a directory arrives on stdout as a tar stream)

One side is ID:PATH (a unique prefix of the id is enough). Modes, symlinks
and empty directories are kept. A progress bar is drawn when stderr is a
terminal, unless -q.`

// remoteSpec matches ID:PATH; a local path with a colon can be written ./a:b.
var remoteSpec = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9_.-]*):(.*)$`)

func splitRemote(s string) (id, p string, ok bool) {
	m := remoteSpec.FindStringSubmatch(s)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

func runCp(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "cp", cpSynopsis)
	var cf clientFlags
	cf.register(fs, "text", "json")
	quiet := fs.Bool("q", false, "draw no progress bar")
	var id, srcPath, dstPath string
	var dstRemote bool
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, 1, func(pos, _ []string) string {
		if len(pos) != 2 {
			return "cp: give a source and a destination (see 'corral cp --help')"
		}
		srcID, src, srcRemote := splitRemote(pos[0])
		dstID, dst, isRemote := splitRemote(pos[1])
		if srcRemote == isRemote {
			return "cp: exactly one of source and destination must be ID:PATH"
		}
		id, srcPath, dstPath, dstRemote = srcID, src, dst, isRemote
		if dstRemote {
			id = dstID
		}
		return ""
	})
	if !ok {
		return code
	}
	pos := inv.pos
	sb, err := sandbox(ctx, inv.c, id)
	if err != nil {
		return cf.fail(e, err, 1)
	}
	cp := &copier{ctx: ctx, e: e, sb: sb, quiet: *quiet}
	if dstRemote {
		err = cp.upload(pos[0], dstPath)
	} else {
		err = cp.download(srcPath, pos[1])
	}
	if err != nil {
		return cf.fail(e, err, 1)
	}
	return 0
}

type copier struct {
	ctx   context.Context
	e     *env
	sb    *sdk.Sandbox
	quiet bool
}

func (cp *copier) progress(label string, total int64) *progress {
	w := cp.e.Stderr
	if cp.quiet {
		w = io.Discard
	}
	return newProgress(w, label, total)
}

// remoteInfo describes a path of the sandbox; ok is false if it is absent.
func (cp *copier) remoteInfo(p string) (api.FileInfo, bool, error) {
	infos, err := cp.sb.FileInfo(cp.ctx, p)
	if errors.Is(err, sdk.ErrNotFound) {
		return api.FileInfo{}, false, nil
	}
	if err != nil {
		return api.FileInfo{}, false, err
	}
	for _, fi := range infos {
		return fi, true, nil
	}
	return api.FileInfo{}, false, nil
}

func (cp *copier) upload(src, dst string) error {
	if dst == "" {
		return fmt.Errorf("cp: the destination path in the sandbox is empty")
	}
	if src == "-" {
		p := cp.progress("stdin → "+dst, 0)
		err := cp.sb.Upload(cp.ctx, dst, &countingReader{r: cp.e.Stdin, p: p}, 0o644)
		p.finish()
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	target := dst
	if rfi, exists, err := cp.remoteInfo(dst); err != nil {
		return err
	} else if (exists && rfi.Type == "directory") || strings.HasSuffix(dst, "/") {
		target = path.Join(dst, filepath.Base(src))
	}
	if !fi.IsDir() {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		p := cp.progress(filepath.Base(src)+" → "+target, fi.Size())
		err = cp.sb.Upload(cp.ctx, target, &countingReader{r: f, p: p}, fi.Mode().Perm())
		p.finish()
		return err
	}
	total, err := treeSize(src)
	if err != nil {
		return err
	}
	p := cp.progress(filepath.Base(src)+"/ → "+target, total)
	defer p.finish()
	pr, pw := io.Pipe()
	go func() {
		_, err := tarfs.Write(&countingWriter{w: pw, p: p}, src)
		pw.CloseWithError(err)
	}()
	_, err = cp.sb.UploadArchive(cp.ctx, target, pr)
	pr.Close()
	return err
}

// treeSize adds up the sizes of the regular files under dir.
func treeSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}

func (cp *copier) download(src, dst string) error {
	rfi, exists, err := cp.remoteInfo(src)
	if err != nil {
		return err
	}
	if !exists {
		return errdefs.Newf(errdefs.ErrNotFound, "", "%s: no such file or directory in sandbox %s", src, cp.sb.ID)
	}
	isDir := rfi.Type == "directory"
	if dst == "-" {
		if isDir {
			_, err := cp.sb.DownloadArchive(cp.ctx, src, cp.e.Stdout)
			return err
		}
		_, err := cp.sb.Download(cp.ctx, src, cp.e.Stdout)
		return err
	}
	target := dst
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		target = filepath.Join(dst, path.Base(src))
	}
	if isDir {
		p := cp.progress(src+"/ → "+target, 0)
		defer p.finish()
		pr, pw := io.Pipe()
		go func() {
			_, err := cp.sb.DownloadArchive(cp.ctx, src, pw)
			pw.CloseWithError(err)
		}()
		_, err := tarfs.Extract(&countingReader{r: pr, p: p}, target, tarfs.ExtractOptions{Chown: os.Geteuid() == 0})
		pr.Close()
		return err
	}
	// A file lands under a temporary name first, so a failed copy never
	// leaves half a file where the old one was.
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".corral-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	p := cp.progress(src+" → "+target, rfi.Size)
	_, err = cp.sb.Download(cp.ctx, src, &countingWriter{w: tmp, p: p})
	p.finish()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if mode, perr := strconv.ParseUint(strconv.Itoa(rfi.Mode), 8, 32); perr == nil {
		_ = os.Chmod(tmp.Name(), fs.FileMode(mode).Perm())
	}
	return os.Rename(tmp.Name(), target)
}
