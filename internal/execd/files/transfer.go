// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package files

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/formdata"
)

// MaxReplaceSize bounds a file that Replace rewrites in memory.
const MaxReplaceSize = 64 << 20

// Replace replaces every occurrence of each item's Old with New in its file
// and returns the count per path. The file is rewritten atomically with its
// mode and owner kept.
func Replace(items map[string]api.ReplaceFileContentItem) (map[string]api.ReplaceFileContentResult, error) {
	out := make(map[string]api.ReplaceFileContentResult, len(items))
	for p, it := range items {
		if it.Old == "" {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidRequestBody, "%s: old must not be empty", p)
		}
		abs, err := Resolve(p)
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return nil, FSError(p, err)
		}
		if !fi.Mode().IsRegular() {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidPath, "%s is not a regular file", p)
		}
		if fi.Size() > MaxReplaceSize {
			return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidFile, "%s is larger than %d MiB", p, MaxReplaceSize>>20)
		}
		data, err := os.ReadFile(abs)
		if err != nil {
			return nil, FSError(p, err)
		}
		n := bytes.Count(data, []byte(it.Old))
		if n > 0 {
			if err := writeAtomic(abs, p, bytes.NewReader(bytes.ReplaceAll(data, []byte(it.Old), []byte(it.New))), fi); err != nil {
				return nil, err
			}
		}
		out[p] = api.ReplaceFileContentResult{ReplacedCount: n}
	}
	return out, nil
}

// writeAtomic writes r to a temporary file beside abs, syncs it, renames
// it over abs and syncs the directory: a reader sees the old file or the
// whole new one, never a half. like, when set, gives mode and owner.
func writeAtomic(abs, shown string, r io.Reader, like fs.FileInfo) (err error) {
	dir := filepath.Dir(abs)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(abs)+".corral-*")
	if err != nil {
		return FSError(shown, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := newBlockWriter(tmp)
	if _, err = io.Copy(bw, r); err != nil {
		_ = bw.Close()
		return uploadError(shown, err)
	}
	if err = bw.Close(); err != nil {
		return FSError(shown, err)
	}
	if like != nil {
		if err = tmp.Chmod(like.Mode().Perm()); err != nil {
			return FSError(shown, err)
		}
		if st, ok := statOwner(like); ok {
			_ = tmp.Chown(st[0], st[1])
		}
	} else if err = tmp.Chmod(0o644); err != nil {
		return FSError(shown, err)
	}
	if err = tmp.Sync(); err != nil {
		return FSError(shown, err)
	}
	if err = tmp.Close(); err != nil {
		return FSError(shown, err)
	}
	if err = os.Rename(tmp.Name(), abs); err != nil {
		return FSError(shown, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// uploadError reports a failure while copying the body: a body that ends
// early is the client's fault.
func uploadError(shown string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "multipart") {
		return errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidFileContent, "%s: the upload ended early (%v); nothing was written", shown, err)
	}
	return FSError(shown, err)
}

// Upload reads a multipart body of (metadata, file) pairs and writes each
// file atomically: streamed to disk, synced, renamed into place, with the
// metadata's mode and owner. metadata may be a file part or a value part;
// a file part arriving before its metadata is spooled in spool (a
// directory) until the metadata arrives. It returns the paths written.
func Upload(mr *formdata.Reader, spool string) ([]string, error) {
	var written []string
	var pending *os.File // a file part that came before its metadata
	defer func() {
		if pending != nil {
			pending.Close()
			os.Remove(pending.Name())
		}
	}()
	var meta *api.FileMetadata
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return written, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidFile, "bad multipart body: %v", err)
		}
		switch part.FormName() {
		case "metadata":
			if meta != nil {
				return written, errdefs.New(errdefs.ErrInvalidArgument, api.CodeExecdInvalidFileMeta, "two metadata parts in a row: each file needs one metadata part")
			}
			b, err := io.ReadAll(io.LimitReader(part, 64<<10))
			if err != nil {
				return written, uploadError("metadata", err)
			}
			var m api.FileMetadata
			if err := json.Unmarshal(b, &m); err != nil || m.Path == "" {
				return written, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidFileMeta, "metadata must be JSON with a path, got %.100q", b)
			}
			meta = &m
			if pending != nil {
				if _, err := pending.Seek(0, io.SeekStart); err != nil {
					return written, err
				}
				p, err := writeUpload(*meta, pending)
				if err != nil {
					return written, err
				}
				written = append(written, p)
				pending.Close()
				os.Remove(pending.Name())
				pending, meta = nil, nil
			}
		case "file":
			if meta == nil {
				if pending != nil {
					return written, errdefs.New(errdefs.ErrInvalidArgument, api.CodeExecdInvalidFile, "two file parts in a row: each file needs one metadata part")
				}
				if pending, err = os.CreateTemp(spool, "upload-*"); err != nil {
					return written, err
				}
				if _, err := io.Copy(pending, part); err != nil {
					return written, uploadError("file", err)
				}
				continue
			}
			p, err := writeUpload(*meta, part)
			if err != nil {
				return written, err
			}
			written = append(written, p)
			meta = nil
		default:
			// Unknown parts are skipped, as form fields a client may add.
			if _, err := io.Copy(io.Discard, part); err != nil {
				return written, uploadError(part.FormName(), err)
			}
		}
	}
	if meta != nil || pending != nil {
		return written, errdefs.New(errdefs.ErrInvalidArgument, api.CodeExecdInvalidFile, "the number of metadata and file parts differ")
	}
	if len(written) == 0 {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, api.CodeExecdInvalidFile, "no file in the upload (send a metadata part and a file part)")
	}
	return written, nil
}

func writeUpload(m api.FileMetadata, r io.Reader) (string, error) {
	abs, err := Resolve(m.Path)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		return "", errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidPath, "%s is a directory", m.Path)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return "", FSError(m.Path, err)
	}
	if err := writeAtomic(abs, m.Path, r, nil); err != nil {
		return "", err
	}
	perm := api.Permission{Owner: m.Owner, Group: m.Group, Mode: m.Mode}
	if err := apply(abs, m.Path, perm); err != nil {
		return "", err
	}
	return abs, nil
}

// Download is an opened file to serve, with its range.
type Download struct {
	File *os.File
	Name string
	Size int64
	// Start and Length select the bytes to send; Partial is set when a
	// Range header selected them.
	Start, Length int64
	Partial       bool
}

// ErrRange is returned for a Range header that cannot be satisfied.
var ErrRange = errors.New("range not satisfiable")

// OpenDownload opens path for download and applies a single-range Range
// header ("bytes=a-b", "bytes=a-", "bytes=-n").
func OpenDownload(path, rangeHeader string) (*Download, error) {
	abs, err := Resolve(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, FSError(path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, FSError(path, err)
	}
	if fi.IsDir() {
		f.Close()
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidPath, "%s is a directory", path)
	}
	d := &Download{File: f, Name: filepath.Base(abs), Size: fi.Size(), Length: fi.Size()}
	if rangeHeader == "" {
		return d, nil
	}
	start, length, err := parseRange(rangeHeader, fi.Size())
	if err != nil {
		f.Close()
		return nil, err
	}
	d.Start, d.Length, d.Partial = start, length, true
	return d, nil
}

func parseRange(h string, size int64) (start, length int64, err error) {
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return 0, 0, fmt.Errorf("%w: want one range as bytes=start-end", ErrRange)
	}
	a, b, ok := strings.Cut(spec, "-")
	if !ok {
		return 0, 0, fmt.Errorf("%w: want bytes=start-end", ErrRange)
	}
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	if a == "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 || size == 0 {
			return 0, 0, fmt.Errorf("%w: bad suffix range %q", ErrRange, spec)
		}
		n = min(n, size)
		return size - n, n, nil
	}
	s, err := strconv.ParseInt(a, 10, 64)
	if err != nil || s < 0 || s >= size {
		return 0, 0, fmt.Errorf("%w: start %q outside a file of %d bytes", ErrRange, a, size)
	}
	e := size - 1
	if b != "" {
		if e, err = strconv.ParseInt(b, 10, 64); err != nil || e < s {
			return 0, 0, fmt.Errorf("%w: bad end %q", ErrRange, b)
		}
		e = min(e, size-1)
	}
	return s, e - s + 1, nil
}
