// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"net/http"
	"sort"

	"github.com/corral-dev/corral/api"
)

// listVolumes is corral's GET /volumes: the tenant's named volumes (the
// contract's "pvc" volumes) and the sandboxes that mount each.
func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) {
	vols, err := s.mgr.ListVolumes(r.Context(), tenant(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.ListVolumesResponse{Items: make([]api.VolumeInfo, 0, len(vols))}
	for _, v := range vols {
		out.Items = append(out.Items, api.VolumeInfo{Name: v.Name, CreatedAt: v.CreatedAt.UTC(), InUseBy: v.InUseBy})
	}
	sort.Slice(out.Items, func(i, j int) bool { return out.Items[i].Name < out.Items[j].Name })
	writeJSON(w, http.StatusOK, out)
}

// deleteVolume is corral's DELETE /volumes/{name}: the volume and its
// files; 409 while a sandbox mounts it.
func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) {
	if err := s.mgr.DeleteVolume(r.Context(), tenant(r), r.PathValue("name")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
