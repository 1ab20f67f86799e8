// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"

	"github.com/corral-dev/corral/api"
)

// UploadFile is one file of an upload.
type UploadFile struct {
	// Path is where the file goes in the sandbox.
	Path string
	// Content is read to its end while uploading.
	Content io.Reader
	// Mode is the permission bits (0 means 0644).
	Mode fs.FileMode
	// Owner and Group name the owner (optional).
	Owner, Group string
}

// octal renders a mode as the contract's octal digits.
func octal(m fs.FileMode) int {
	n, _ := strconv.Atoi(strconv.FormatUint(uint64(m.Perm()), 8))
	return n
}

// UploadFiles streams files into the sandbox in one request. Each lands
// atomically: a failed upload leaves the previous file untouched.
func (s *Sandbox) UploadFiles(ctx context.Context, files []UploadFile) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		var err error
		for _, f := range files {
			meta, _ := json.Marshal(api.FileMetadata{Path: f.Path, Owner: f.Owner, Group: f.Group, Mode: octal(f.Mode)})
			var w io.Writer
			if w, err = mw.CreateFormFile("metadata", "metadata"); err != nil {
				break
			}
			if _, err = w.Write(meta); err != nil {
				break
			}
			if w, err = mw.CreateFormFile("file", "file"); err != nil {
				break
			}
			if _, err = io.Copy(w, f.Content); err != nil {
				break
			}
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	res, err := s.do(ctx, http.MethodPost, "/files/upload", nil, pr, mw.FormDataContentType())
	pr.Close()
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return decodeError(res)
	}
	return nil
}

// Upload streams one file into the sandbox.
func (s *Sandbox) Upload(ctx context.Context, path string, r io.Reader, mode fs.FileMode) error {
	return s.UploadFiles(ctx, []UploadFile{{Path: path, Content: r, Mode: mode}})
}

// Download streams a file of the sandbox to w and returns its size.
func (s *Sandbox) Download(ctx context.Context, path string, w io.Writer) (int64, error) {
	res, err := s.do(ctx, http.MethodGet, "/files/download", url.Values{"path": {path}}, nil, "")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, decodeError(res)
	}
	n, err := io.Copy(w, res.Body)
	if err == nil && res.ContentLength >= 0 && n != res.ContentLength {
		err = fmt.Errorf("download %s: got %d of %d bytes: %w", path, n, res.ContentLength, io.ErrUnexpectedEOF)
	}
	return n, err
}

// FileInfo describes paths of the sandbox.
func (s *Sandbox) FileInfo(ctx context.Context, paths ...string) (map[string]api.FileInfo, error) {
	var out map[string]api.FileInfo
	err := s.call(ctx, http.MethodGet, "/files/info", url.Values{"path": paths}, nil, &out)
	return out, err
}

// ListDir lists a directory down to depth levels (1: its children).
func (s *Sandbox) ListDir(ctx context.Context, path string, depth int) ([]api.FileInfo, error) {
	var out []api.FileInfo
	err := s.call(ctx, http.MethodGet, "/directories/list", url.Values{"path": {path}, "depth": {strconv.Itoa(depth)}}, nil, &out)
	return out, err
}

// MakeDirs creates directories with their parents.
func (s *Sandbox) MakeDirs(ctx context.Context, dirs map[string]fs.FileMode) error {
	in := map[string]api.Permission{}
	for p, m := range dirs {
		in[p] = api.Permission{Mode: octal(m)}
	}
	return s.call(ctx, http.MethodPost, "/directories", nil, in, nil)
}

// RemoveDirs removes directories and everything in them.
func (s *Sandbox) RemoveDirs(ctx context.Context, paths ...string) error {
	return s.call(ctx, http.MethodDelete, "/directories", url.Values{"path": paths}, nil, nil)
}

// RemoveFiles removes files.
func (s *Sandbox) RemoveFiles(ctx context.Context, paths ...string) error {
	return s.call(ctx, http.MethodDelete, "/files", url.Values{"path": paths}, nil, nil)
}

// Move renames files and directories.
func (s *Sandbox) Move(ctx context.Context, moves ...api.RenameFileItem) error {
	return s.call(ctx, http.MethodPost, "/files/mv", nil, moves, nil)
}

// Chmod sets permissions.
func (s *Sandbox) Chmod(ctx context.Context, perms map[string]api.Permission) error {
	return s.call(ctx, http.MethodPost, "/files/permissions", nil, perms, nil)
}

// Search finds files below dir whose name matches a glob.
func (s *Sandbox) Search(ctx context.Context, dir, pattern string) ([]api.FileInfo, error) {
	var out []api.FileInfo
	err := s.call(ctx, http.MethodGet, "/files/search", url.Values{"path": {dir}, "pattern": {pattern}}, nil, &out)
	return out, err
}

// Replace replaces text in files and returns the count per file.
func (s *Sandbox) Replace(ctx context.Context, items map[string]api.ReplaceFileContentItem) (map[string]api.ReplaceFileContentResult, error) {
	var out map[string]api.ReplaceFileContentResult
	err := s.call(ctx, http.MethodPost, "/files/replace", url.Values{"verbose": {"true"}}, items, &out)
	return out, err
}

// ArchiveStats count what a directory archive held.
type ArchiveStats struct {
	Files   int   `json:"files"`
	Dirs    int   `json:"dirs"`
	Links   int   `json:"links"`
	Bytes   int64 `json:"bytes"`
	Skipped int   `json:"skipped"`
}

// UploadArchive streams a tar archive from r and unpacks it into dir of
// the sandbox (created if missing), keeping modes, links and empty
// directories. Entries that would land outside dir are refused. This is a
// corral extension of the execd API.
func (s *Sandbox) UploadArchive(ctx context.Context, dir string, r io.Reader) (*ArchiveStats, error) {
	res, err := s.do(ctx, http.MethodPut, "/directories/archive", url.Values{"path": {dir}}, r, "application/x-tar")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, decodeError(res)
	}
	var st ArchiveStats
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("sandbox %s: archive answer: %w", s.ID, err)
	}
	return &st, nil
}

// DownloadArchive streams the tree under dir of the sandbox to w as a tar
// archive with names relative to dir, and returns the bytes written. A
// corral extension of the execd API.
func (s *Sandbox) DownloadArchive(ctx context.Context, dir string, w io.Writer) (int64, error) {
	res, err := s.do(ctx, http.MethodGet, "/directories/archive", url.Values{"path": {dir}}, nil, "")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, decodeError(res)
	}
	return io.Copy(w, res.Body)
}
