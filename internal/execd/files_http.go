// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/execd/files"
	"github.com/corral-dev/corral/internal/formdata"
)

func (s *Server) filesInfo(w http.ResponseWriter, r *http.Request) {
	out, err := files.Info(r.URL.Query()["path"])
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func paths(r *http.Request) ([]string, error) {
	ps := r.URL.Query()["path"]
	if len(ps) == 0 {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, api.CodeExecdMissingQuery, `query parameter "path" is required`)
	}
	return ps, nil
}

func (s *Server) removeFiles(w http.ResponseWriter, r *http.Request) {
	ps, err := paths(r)
	if err == nil {
		err = files.RemoveFiles(ps)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) chmodFiles(w http.ResponseWriter, r *http.Request) {
	var req map[string]api.Permission
	if err := decode(r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	if err := files.Chmod(req); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) moveFiles(w http.ResponseWriter, r *http.Request) {
	var req []api.RenameFileItem
	if err := decode(r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	for i, it := range req {
		if it.Src == "" || it.Dest == "" {
			writeError(w, badRequest("item %d: src and dest are required", i))
			return
		}
	}
	if err := files.Move(req); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) searchFiles(w http.ResponseWriter, r *http.Request) {
	dir, err := query(r, "path")
	if err != nil {
		writeError(w, err)
		return
	}
	out, err := files.Search(dir, r.URL.Query().Get("pattern"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) replaceFiles(w http.ResponseWriter, r *http.Request) {
	var req map[string]api.ReplaceFileContentItem
	if err := decode(r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	out, err := files.Replace(req)
	if err != nil {
		writeError(w, err)
		return
	}
	if v, _ := strconv.ParseBool(r.URL.Query().Get("verbose")); v {
		writeJSON(w, http.StatusOK, out)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) uploadFiles(w http.ResponseWriter, r *http.Request) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		writeError(w, errdefs.New(errdefs.ErrInvalidArgument, api.CodeExecdInvalidFile, "the upload must be multipart/form-data with metadata and file parts"))
		return
	}
	mr, err := formdata.NewReader(r.Body, params["boundary"])
	if err != nil {
		writeError(w, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidFile, "bad multipart body: %v", err))
		return
	}
	spool := filepath.Join(s.cfg.StateDir, "uploads")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		writeError(w, err)
		return
	}
	if _, err := files.Upload(mr, spool); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) downloadFile(w http.ResponseWriter, r *http.Request) {
	p, err := query(r, "path")
	if err != nil {
		writeError(w, err)
		return
	}
	d, err := files.OpenDownload(p, r.Header.Get("Range"))
	if errors.Is(err, files.ErrRange) {
		writeJSON(w, http.StatusRequestedRangeNotSatisfiable, api.ErrorResponse{Code: api.CodeExecdRangeNotSatisfied, Message: err.Error()})
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	defer d.File.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", contentDisposition(d.Name))
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Length", strconv.FormatInt(d.Length, 10))
	status := http.StatusOK
	if d.Partial {
		status = http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", d.Start, d.Start+d.Length-1, d.Size))
	}
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = io.Copy(w, io.NewSectionReader(d.File, d.Start, d.Length))
}

// contentDisposition names the file, with RFC 5987 for non-ASCII names.
func contentDisposition(name string) string {
	ascii := true
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] > 0x7e || name[i] == '"' || name[i] == '\\' {
			ascii = false
		}
	}
	if ascii {
		return `attachment; filename="` + name + `"`
	}
	return `attachment; filename="download"; filename*=UTF-8''` + url.PathEscape(name)
}

func (s *Server) listDirectory(w http.ResponseWriter, r *http.Request) {
	dir, err := query(r, "path")
	if err != nil {
		writeError(w, err)
		return
	}
	depth := 1
	if v := r.URL.Query().Get("depth"); v != "" {
		if depth, err = strconv.Atoi(v); err != nil || depth < 0 || depth > 64 {
			writeError(w, badRequest("depth %q: must be a whole number from 0 to 64", v))
			return
		}
	}
	if depth == 0 {
		if _, err := files.List(dir, 0); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, []api.FileInfo{})
		return
	}
	out, err := files.List(dir, depth)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) makeDirs(w http.ResponseWriter, r *http.Request) {
	var req map[string]api.Permission
	if err := decode(r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	if err := files.Mkdirs(req); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) removeDirs(w http.ResponseWriter, r *http.Request) {
	ps, err := paths(r)
	if err == nil {
		err = files.RemoveDirs(ps)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) getMetrics(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.metrics.metrics())
}

// watchMetrics streams a metrics event every second, blank-line framed
// with "type":"metrics", until the client goes away.
func (s *Server) watchMetrics(w http.ResponseWriter, r *http.Request) {
	es := newEventStream(w)
	es.start()
	t := newTicker()
	defer t.Stop()
	for {
		m := s.metrics.metrics()
		m.Type = api.EventMetrics
		if err := es.sw.Write(m); err != nil {
			return
		}
		if err := es.flush(); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}
