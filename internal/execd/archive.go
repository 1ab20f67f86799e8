// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"errors"
	"io/fs"
	"net/http"
	"os"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/execd/files"
	"github.com/corral-dev/corral/internal/tarfs"
)

// Directory archives are a corral extension: a whole tree moves in one
// streamed tar, keeping modes, links and empty directories, which
// per-file uploads cannot.

// downloadArchive answers GET /directories/archive?path=DIR with a tar
// stream of DIR's contents. An error after the stream started cuts it
// short, which a tar reader sees as an unexpected EOF.
func (s *Server) downloadArchive(w http.ResponseWriter, r *http.Request) {
	dir, err := archiveDir(r)
	if err == nil {
		var fi fs.FileInfo
		if fi, err = os.Stat(dir); err == nil && !fi.IsDir() {
			err = errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidPath, "%s is not a directory", dir)
		} else if err != nil {
			err = files.FSError(dir, err)
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	if _, err := tarfs.Write(w, dir); err != nil {
		s.log.WarnContext(r.Context(), "directory archive cut short", "path", dir, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// uploadArchive answers PUT /directories/archive?path=DIR: the tar body
// is unpacked into DIR (created if missing); nothing lands outside it.
func (s *Server) uploadArchive(w http.ResponseWriter, r *http.Request) {
	dir, err := archiveDir(r)
	if err != nil {
		writeError(w, err)
		return
	}
	st, err := tarfs.Extract(r.Body, dir, tarfs.ExtractOptions{Chown: os.Geteuid() == 0})
	if errors.Is(err, tarfs.ErrBadArchive) {
		writeError(w, badRequest("archive for %s: %v", dir, err))
		return
	}
	if err != nil {
		writeError(w, files.FSError(dir, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": st.Files, "dirs": st.Dirs, "links": st.Links, "bytes": st.Bytes, "skipped": st.Skipped})
}

func archiveDir(r *http.Request) (string, error) {
	p, err := query(r, "path")
	if err != nil {
		return "", err
	}
	return files.Resolve(p)
}
