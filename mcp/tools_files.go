// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io/fs"
	"mime"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sdk"
)

// errFull stops a download at the policy's cap.
var errFull = errors.New("cap reached")

// window keeps the bytes [skip, skip+limit) of what is written to it.
type window struct {
	skip, limit int64
	seen        int64
	buf         bytes.Buffer
	more        bool // bytes past the window were written
}

func (w *window) Write(p []byte) (int, error) {
	n := len(p)
	start := max(w.skip-w.seen, 0)
	w.seen += int64(n)
	if start >= int64(n) {
		return n, nil
	}
	p = p[start:]
	room := w.limit - int64(w.buf.Len())
	if int64(len(p)) > room {
		w.buf.Write(p[:room])
		w.more = true
		return n, errFull
	}
	w.buf.Write(p)
	return n, nil
}

// fetch downloads [offset, offset+length) of a file, at most the policy's
// cap; truncated reports that the file (or range) went on.
func (s *Session) fetch(ctx context.Context, sb *sdk.Sandbox, p string, offset, length int64) ([]byte, bool, error) {
	limit := int64(s.pol.Limits.FileBytes)
	w := &window{skip: offset, limit: limit}
	if length >= 0 && length <= limit {
		w.limit = length
	}
	_, err := sb.Download(ctx, p, w)
	if err != nil && !errors.Is(err, errFull) {
		return nil, false, err
	}
	return w.buf.Bytes(), w.more && (length < 0 || length > limit), nil
}

type readIn struct {
	SandboxID   string `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	Path        string `json:"path" jsonschema:"the file, relative to the work directory or absolute within it"`
	Encoding    string `json:"encoding,omitempty" jsonschema:"utf-8 (default) or base64"`
	RangeHeader string `json:"range_header,omitempty" jsonschema:"an HTTP byte range: bytes=START-END, bytes=START- or bytes=-N"`
	// ConnectIfMissing is OpenSandbox's.
	ConnectIfMissing bool `json:"connect_if_missing,omitempty" jsonschema:"accepted for compatibility"`
}

// ReadOut is file_read's result.
type ReadOut struct {
	Failure
	SandboxID string `json:"sandbox_id,omitempty"`
	Path      string `json:"path,omitempty"`
	Content   string `json:"content"`
	Encoding  string `json:"encoding,omitempty"`
	Bytes     int    `json:"bytes" jsonschema:"how many bytes content holds"`
	Truncated bool   `json:"truncated" jsonschema:"whether the file went on past the policy's cap"`
}

// parseRange reads bytes=A-B, bytes=A- and bytes=-N (size needed for the
// last); length -1 means to the end.
func parseRange(h string, size func() (int64, error)) (offset, length int64, err error) {
	if h == "" {
		return 0, -1, nil
	}
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	a, b, ok2 := strings.Cut(spec, "-")
	if !ok || !ok2 || strings.Contains(spec, ",") {
		return 0, 0, badArgs("range_header %q: want bytes=START-END, bytes=START- or bytes=-N", h)
	}
	num := func(s string) (int64, error) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, badArgs("range_header %q: %q is not a byte offset", h, s)
		}
		return n, nil
	}
	switch {
	case a == "":
		n, err := num(b)
		if err != nil {
			return 0, 0, err
		}
		sz, err := size()
		if err != nil {
			return 0, 0, err
		}
		return max(sz-n, 0), n, nil
	case b == "":
		off, err := num(a)
		return off, -1, err
	}
	off, err := num(a)
	if err != nil {
		return 0, 0, err
	}
	end, err := num(b)
	if err != nil {
		return 0, 0, err
	}
	if end < off {
		return 0, 0, badArgs("range_header %q: the end is before the start", h)
	}
	return off, end - off + 1, nil
}

func readFile(ctx context.Context, s *Session, c *call, in readIn) (*ReadOut, error) {
	p, err := s.pol.confine(in.Path, "path")
	if err != nil {
		return nil, err
	}
	enc, err := encoding(in.Encoding)
	if err != nil {
		return nil, err
	}
	sb, err := s.sandbox(ctx, c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	off, length, err := parseRange(in.RangeHeader, func() (int64, error) {
		fi, err := sb.FileInfo(ctx, p)
		if err != nil {
			return 0, err
		}
		return fi[p].Size, nil
	})
	if err != nil {
		return nil, err
	}
	b, trunc, err := s.fetch(ctx, sb, p, off, length)
	if err != nil {
		return nil, err
	}
	out := &ReadOut{SandboxID: sb.ID, Path: p, Encoding: enc, Bytes: len(b), Truncated: trunc}
	if enc == "base64" {
		out.Content = base64.StdEncoding.EncodeToString(b)
	} else {
		out.Content = validUTF8(string(b))
	}
	return out, nil
}

func encoding(e string) (string, error) {
	switch strings.ToLower(strings.ReplaceAll(e, "_", "-")) {
	case "", "utf-8", "utf8", "text":
		return "utf-8", nil
	case "base64":
		return "base64", nil
	}
	return "", badArgs("encoding %q: want utf-8 or base64", e)
}

type writeIn struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	Path      string `json:"path" jsonschema:"the file, relative to the work directory or absolute within it"`
	Content   string `json:"content"`
	Encoding  string `json:"encoding,omitempty" jsonschema:"utf-8 (default) or base64"`
	Mode      int    `json:"mode,omitempty" jsonschema:"permissions as octal digits, such as 644 or 755 (default 755)"`
	Owner     string `json:"owner,omitempty"`
	Group     string `json:"group,omitempty"`
	// ConnectIfMissing is OpenSandbox's.
	ConnectIfMissing bool `json:"connect_if_missing,omitempty" jsonschema:"accepted for compatibility"`
}

// WriteOut is file_write's result.
type WriteOut struct {
	Failure
	SandboxID string `json:"sandbox_id,omitempty"`
	Path      string `json:"path,omitempty"`
	Bytes     int    `json:"bytes"`
}

// octalMode reads permissions written as octal digits (755).
func octalMode(m int) (fs.FileMode, error) {
	if m == 0 {
		m = 755
	}
	v, err := strconv.ParseUint(strconv.Itoa(m), 8, 32)
	if err != nil || v > 0o7777 {
		return 0, badArgs("mode %d: want octal digits such as 644 or 755", m)
	}
	return fs.FileMode(v), nil
}

func writeFile(ctx context.Context, s *Session, c *call, in writeIn) (*WriteOut, error) {
	p, err := s.pol.confine(in.Path, "path")
	if err != nil {
		return nil, err
	}
	if p == s.pol.Template.Workdir {
		return nil, badArgs("path is required")
	}
	enc, err := encoding(in.Encoding)
	if err != nil {
		return nil, err
	}
	data := []byte(in.Content)
	if enc == "base64" {
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return nil, badArgs("content is not valid base64: %v", err)
		}
	}
	if len(data) > s.pol.Limits.FileBytes {
		return nil, badArgs("content is %d bytes; the policy allows at most %d", len(data), s.pol.Limits.FileBytes)
	}
	mode, err := octalMode(in.Mode)
	if err != nil {
		return nil, err
	}
	sb, err := s.sandbox(ctx, c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	if err := sb.MakeDirs(ctx, map[string]fs.FileMode{path.Dir(p): 0o755}); err != nil {
		return nil, err
	}
	if err := sb.UploadFiles(ctx, []sdk.UploadFile{{Path: p, Content: bytes.NewReader(data), Mode: mode, Owner: in.Owner, Group: in.Group}}); err != nil {
		return nil, err
	}
	return &WriteOut{SandboxID: sb.ID, Path: p, Bytes: len(data)}, nil
}

type pathsIn struct {
	SandboxID string   `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	Paths     []string `json:"paths"`
	// ConnectIfMissing is OpenSandbox's.
	ConnectIfMissing bool `json:"connect_if_missing,omitempty" jsonschema:"accepted for compatibility"`
}

// PathsOut is the result of the tools that change paths.
type PathsOut struct {
	Failure
	SandboxID string   `json:"sandbox_id,omitempty"`
	Paths     []string `json:"paths"`
}

// confineAll resolves paths, refusing the work directory itself.
func (s *Session) confineAll(ps []string, name string) ([]string, error) {
	if len(ps) == 0 {
		return nil, badArgs("%s: give at least one path", name)
	}
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		full, err := s.pol.confine(p, name)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(p) == "" {
			return nil, badArgs("%s: an empty path", name)
		}
		out = append(out, full)
	}
	return out, nil
}

func deleteFiles(ctx context.Context, s *Session, c *call, in pathsIn) (*PathsOut, error) {
	ps, err := s.confineAll(in.Paths, "paths")
	if err != nil {
		return nil, err
	}
	sb, err := s.sandbox(ctx, c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	if err := sb.RemoveFiles(ctx, ps...); err != nil {
		return nil, err
	}
	return &PathsOut{SandboxID: sb.ID, Paths: ps}, nil
}

func removeDirs(ctx context.Context, s *Session, c *call, in pathsIn) (*PathsOut, error) {
	ps, err := s.confineAll(in.Paths, "paths")
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p == s.pol.Template.Workdir {
			return nil, badArgs("paths: the work directory itself cannot be deleted")
		}
	}
	sb, err := s.sandbox(ctx, c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	if err := sb.RemoveDirs(ctx, ps...); err != nil {
		return nil, err
	}
	return &PathsOut{SandboxID: sb.ID, Paths: ps}, nil
}

type dirsIn struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	Entries   []struct {
		Path  string `json:"path"`
		Mode  int    `json:"mode,omitempty" jsonschema:"octal digits (default 755)"`
		Owner string `json:"owner,omitempty"`
		Group string `json:"group,omitempty"`
	} `json:"entries"`
	// ConnectIfMissing is OpenSandbox's.
	ConnectIfMissing bool `json:"connect_if_missing,omitempty" jsonschema:"accepted for compatibility"`
}

func makeDirs(ctx context.Context, s *Session, c *call, in dirsIn) (*PathsOut, error) {
	if len(in.Entries) == 0 {
		return nil, badArgs("entries: give at least one directory")
	}
	dirs := map[string]fs.FileMode{}
	perms := map[string]api.Permission{}
	var ps []string
	for _, e := range in.Entries {
		p, err := s.pol.confine(e.Path, "entries.path")
		if err != nil {
			return nil, err
		}
		m, err := octalMode(e.Mode)
		if err != nil {
			return nil, err
		}
		dirs[p] = m
		ps = append(ps, p)
		if e.Owner != "" || e.Group != "" {
			perms[p] = api.Permission{Owner: e.Owner, Group: e.Group, Mode: e.Mode}
		}
	}
	sb, err := s.sandbox(ctx, c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	if err := sb.MakeDirs(ctx, dirs); err != nil {
		return nil, err
	}
	if len(perms) > 0 {
		if err := sb.Chmod(ctx, perms); err != nil {
			return nil, err
		}
	}
	return &PathsOut{SandboxID: sb.ID, Paths: ps}, nil
}

type moveIn struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	Entries   []struct {
		Src  string `json:"src"`
		Dest string `json:"dest"`
	} `json:"entries"`
	// ConnectIfMissing is OpenSandbox's.
	ConnectIfMissing bool `json:"connect_if_missing,omitempty" jsonschema:"accepted for compatibility"`
}

func moveFiles(ctx context.Context, s *Session, c *call, in moveIn) (*PathsOut, error) {
	if len(in.Entries) == 0 {
		return nil, badArgs("entries: give at least one move")
	}
	var moves []api.RenameFileItem
	var ps []string
	for _, e := range in.Entries {
		src, err := s.pol.confine(e.Src, "entries.src")
		if err != nil {
			return nil, err
		}
		dst, err := s.pol.confine(e.Dest, "entries.dest")
		if err != nil {
			return nil, err
		}
		moves = append(moves, api.RenameFileItem{Src: src, Dest: dst})
		ps = append(ps, dst)
	}
	sb, err := s.sandbox(ctx, c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	if err := sb.Move(ctx, moves...); err != nil {
		return nil, err
	}
	return &PathsOut{SandboxID: sb.ID, Paths: ps}, nil
}

type replaceIn struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	Entries   []struct {
		Path       string `json:"path"`
		OldContent string `json:"old_content"`
		NewContent string `json:"new_content"`
	} `json:"entries"`
	// ConnectIfMissing is OpenSandbox's.
	ConnectIfMissing bool `json:"connect_if_missing,omitempty" jsonschema:"accepted for compatibility"`
}

// ReplaceOut is file_replace_contents's result.
type ReplaceOut struct {
	Failure
	SandboxID string         `json:"sandbox_id,omitempty"`
	Replaced  map[string]int `json:"replaced" jsonschema:"replacements made, per file"`
}

func replaceContents(ctx context.Context, s *Session, c *call, in replaceIn) (*ReplaceOut, error) {
	if len(in.Entries) == 0 {
		return nil, badArgs("entries: give at least one replacement")
	}
	items := map[string]api.ReplaceFileContentItem{}
	for _, e := range in.Entries {
		p, err := s.pol.confine(e.Path, "entries.path")
		if err != nil {
			return nil, err
		}
		if e.OldContent == "" {
			return nil, badArgs("entries.old_content: empty for %s", p)
		}
		if _, dup := items[p]; dup {
			return nil, badArgs("entries: %s appears twice; one replacement per file and call", p)
		}
		items[p] = api.ReplaceFileContentItem{Old: e.OldContent, New: e.NewContent}
	}
	sb, err := s.sandbox(ctx, c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	res, err := sb.Replace(ctx, items)
	if err != nil {
		return nil, err
	}
	out := &ReplaceOut{SandboxID: sb.ID, Replaced: map[string]int{}}
	for p := range items {
		out.Replaced[p] = res[p].ReplacedCount
	}
	return out, nil
}

type searchIn struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	Path      string `json:"path,omitempty" jsonschema:"the directory to search (default: the work directory)"`
	Pattern   string `json:"pattern" jsonschema:"a glob matched against file names, such as *.py"`
	// ConnectIfMissing is OpenSandbox's.
	ConnectIfMissing bool `json:"connect_if_missing,omitempty" jsonschema:"accepted for compatibility"`
}

// FileEntry is one file as the tools list it.
type FileEntry struct {
	Path       string    `json:"path"`
	Type       string    `json:"type,omitempty"`
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
	MIMEType   string    `json:"mime_type,omitempty"`
}

// FilesOut is the result of the tools that list files.
type FilesOut struct {
	Failure
	SandboxID string      `json:"sandbox_id,omitempty"`
	Dir       string      `json:"dir,omitempty"`
	Files     []FileEntry `json:"files"`
	Truncated bool        `json:"truncated" jsonschema:"whether more files matched than are listed"`
}

// maxListed bounds a listing.
const maxListed = 1000

func listing(infos []api.FileInfo, filesOnly bool) ([]FileEntry, bool) {
	sort.Slice(infos, func(i, j int) bool { return infos[i].Path < infos[j].Path })
	out := []FileEntry{}
	for _, fi := range infos {
		if filesOnly && fi.Type == "directory" {
			continue
		}
		if len(out) == maxListed {
			return out, true
		}
		out = append(out, FileEntry{Path: fi.Path, Type: fi.Type, Size: fi.Size, ModifiedAt: fi.ModifiedAt, MIMEType: mime.TypeByExtension(path.Ext(fi.Path))})
	}
	return out, false
}

func searchFiles(ctx context.Context, s *Session, c *call, in searchIn) (*FilesOut, error) {
	dir, err := s.pol.confine(in.Path, "path")
	if err != nil {
		return nil, err
	}
	if in.Pattern == "" {
		return nil, badArgs("pattern is required (such as *.py)")
	}
	if _, err := path.Match(in.Pattern, ""); err != nil {
		return nil, badArgs("pattern %q: %v", in.Pattern, err)
	}
	sb, err := s.sandbox(ctx, c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	infos, err := sb.Search(ctx, dir, in.Pattern)
	if err != nil {
		return nil, err
	}
	files, trunc := listing(infos, false)
	return &FilesOut{SandboxID: sb.ID, Dir: dir, Files: files, Truncated: trunc}, nil
}

type artifactsIn struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	Dir       string `json:"dir,omitempty" jsonschema:"a directory within the work directory (default: all of it)"`
}

func listArtifacts(ctx context.Context, s *Session, c *call, in artifactsIn) (*FilesOut, error) {
	dir, err := s.pol.confine(in.Dir, "dir")
	if err != nil {
		return nil, err
	}
	sb, err := s.sandbox(ctx, c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	infos, err := sb.Search(ctx, dir, "*")
	if err != nil {
		return nil, err
	}
	files, trunc := listing(infos, true)
	return &FilesOut{SandboxID: sb.ID, Dir: dir, Files: files, Truncated: trunc}, nil
}

type artifactIn struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"the sandbox (default: the session's only one)"`
	Path      string `json:"path" jsonschema:"the file, relative to the work directory"`
}

// ArtifactOut is artifact_get's result.
type ArtifactOut struct {
	Failure
	SandboxID string `json:"sandbox_id,omitempty"`
	Path      string `json:"path,omitempty"`
	MIMEType  string `json:"mime_type,omitempty"`
	Bytes     int    `json:"bytes"`
	// Content is the file as text, or base64 for binary files; empty for
	// images, which come as image content.
	Content   string `json:"content,omitempty"`
	Encoding  string `json:"encoding,omitempty" jsonschema:"utf-8, base64 or image (attached as image content)"`
	Truncated bool   `json:"truncated" jsonschema:"whether the file went on past the policy's cap"`
}

// imageTypes are returned as MCP image content.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

func getArtifact(ctx context.Context, s *Session, c *call, in artifactIn) (*ArtifactOut, error) {
	p, err := s.pol.confine(in.Path, "path")
	if err != nil {
		return nil, err
	}
	sb, err := s.sandbox(ctx, c, in.SandboxID)
	if err != nil {
		return nil, err
	}
	b, trunc, err := s.fetch(ctx, sb, p, 0, -1)
	if err != nil {
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(mime.TypeByExtension(path.Ext(p)))
	out := &ArtifactOut{SandboxID: sb.ID, Path: p, MIMEType: mt, Bytes: len(b), Truncated: trunc}
	switch {
	case imageTypes[mt] && !trunc:
		out.Encoding = "image"
		c.content = append(c.content, &sdkmcp.ImageContent{MIMEType: mt, Data: b})
	case utf8.Valid(b):
		out.Encoding, out.Content = "utf-8", string(b)
	default:
		out.Encoding, out.Content = "base64", base64.StdEncoding.EncodeToString(b)
	}
	return out, nil
}
