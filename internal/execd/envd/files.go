// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package envd

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"connectrpc.com/connect"

	"github.com/corral-dev/corral/internal/formdata"
)

// writtenEntry is one file of POST /files's answer.
type writtenEntry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// writeHTTPError answers envd's plain-HTTP error shape, {code, message},
// with code equal to the status (the SDK reads the body's code).
func writeHTTPError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": status, "message": msg})
}

// httpFromErr answers err (a Connect error or a file system one).
func httpFromErr(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		switch ce.Code() {
		case connect.CodeInvalidArgument, connect.CodeAlreadyExists, connect.CodeFailedPrecondition:
			status = http.StatusBadRequest
		case connect.CodeNotFound:
			status = http.StatusNotFound
		case connect.CodePermissionDenied:
			status = http.StatusForbidden
		case connect.CodeResourceExhausted:
			status = http.StatusInsufficientStorage
		}
		writeHTTPError(w, status, ce.Message())
		return
	case errors.Is(err, fs.ErrNotExist):
		status = http.StatusNotFound
	case errors.Is(err, fs.ErrPermission):
		status = http.StatusForbidden
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ENAMETOOLONG):
		status = http.StatusBadRequest
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		status = http.StatusInsufficientStorage
	}
	writeHTTPError(w, status, err.Error())
}

// download answers GET /files?path=&username=: the file's bytes.
func (s *Service) download(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, err := s.identityFrom(r.Header, q.Get("username"))
	if err != nil {
		httpFromErr(w, err)
		return
	}
	path, err := id.resolve(q.Get("path"))
	if err != nil {
		httpFromErr(w, err)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		httpFromErr(w, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		httpFromErr(w, err)
		return
	}
	if fi.IsDir() {
		writeHTTPError(w, http.StatusBadRequest, fmt.Sprintf("%s is a directory; list it with ListDir", path))
		return
	}
	if !fi.Mode().IsRegular() {
		writeHTTPError(w, http.StatusBadRequest, fmt.Sprintf("%s is not a regular file", path))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filepath.Base(path)}))
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") && r.Header.Get("Range") == "" {
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(http.StatusOK)
		gz := gzip.NewWriter(w)
		_, _ = io.Copy(gz, f)
		_ = gz.Close()
		return
	}
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// upload answers POST /files: multipart parts named "file" (the target
// is ?path=, or each part's filename when path is absent), or a raw body
// (application/octet-stream, gzip allowed) written to ?path=. Parent
// directories are made; existing files are replaced.
func (s *Service) upload(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, err := s.identityFrom(r.Header, q.Get("username"))
	if err != nil {
		httpFromErr(w, err)
		return
	}
	var out []writtenEntry
	write := func(target string, body io.Reader) error {
		path, err := id.resolve(target)
		if err != nil {
			return err
		}
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is a directory", path))
		}
		if err := id.mkdirAll(filepath.Dir(path)); err != nil {
			return err
		}
		if err := writeFile(path, body, id); err != nil {
			return err
		}
		out = append(out, writtenEntry{Name: filepath.Base(path), Type: "file", Path: path})
		return nil
	}
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "multipart/form-data":
		mr, err := formdata.NewReader(r.Body, params["boundary"])
		if err != nil {
			writeHTTPError(w, http.StatusBadRequest, "read the multipart body: "+err.Error())
			return
		}
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				writeHTTPError(w, http.StatusBadRequest, "read the multipart body: "+err.Error())
				return
			}
			if part.FormName() != "file" {
				continue // the next NextPart skips it
			}
			target := q.Get("path")
			if target == "" {
				// The part's filename as sent: the whole target path
				// (FileName would keep only its last element).
				_, dp, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
				target = dp["filename"]
			}
			if target == "" {
				writeHTTPError(w, http.StatusBadRequest, "a file part needs ?path= or a filename naming its target")
				return
			}
			if err := write(target, part); err != nil {
				httpFromErr(w, err)
				return
			}
		}
	case "application/octet-stream", "":
		var body io.Reader = r.Body
		if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				writeHTTPError(w, http.StatusBadRequest, "the gzip body is not valid: "+err.Error())
				return
			}
			body = gz
		}
		if q.Get("path") == "" {
			writeHTTPError(w, http.StatusBadRequest, "an octet-stream upload needs ?path=")
			return
		}
		if err := write(q.Get("path"), body); err != nil {
			httpFromErr(w, err)
			return
		}
	default:
		writeHTTPError(w, http.StatusBadRequest, fmt.Sprintf("Content-Type %q: send multipart/form-data or application/octet-stream", ct))
		return
	}
	if len(out) == 0 {
		writeHTTPError(w, http.StatusBadRequest, "the request holds no file part named \"file\"")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// writeFile replaces path's content with body's, through a file beside
// it renamed into place, so a reader never sees half a file and a
// failed upload leaves the old one.
func writeFile(path string, body io.Reader, id identity) error {
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".upload-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), mode)
	}
	if err == nil {
		err = id.chown(tmp.Name())
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}
