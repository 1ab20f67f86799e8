// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/corral-dev/corral/internal/egress/mitm"
	"github.com/corral-dev/corral/internal/egress/nft"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/egress/vault"
	"github.com/corral-dev/corral/internal/insandbox"
)

// vaultFile keeps the vault (values included) in Config.VaultDir, 0600,
// on the host only.
const vaultFile = "vault.json"

// DefaultVaultListen is where the credential proxy listens inside the
// sandbox's namespace; redirected connections arrive there.
const DefaultVaultListen = insandbox.VaultProxyListen

// DefaultGateListen is the name gate's address in the sandbox, and the
// ports it checks.
const DefaultGateListen = "127.0.0.1:18082"

func gatePorts() []uint16 { return []uint16{80, 443} }

// loadVault reads the persisted vault, if any.
func (s *Service) loadVault() error {
	ca, err := mitm.LoadCA(s.cfg.VaultDir)
	if err != nil {
		return err
	}
	s.ca = ca
	b, err := os.ReadFile(filepath.Join(s.cfg.VaultDir, vaultFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var v vault.Vault
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("the persisted vault is unreadable: %w", err)
	}
	s.vault.Store(&v)
	return nil
}

// currentVault is the vault in force (the zero vault when none).
func (s *Service) currentVault() vault.Vault {
	if v := s.vault.Load(); v != nil {
		return *v
	}
	return vault.Vault{}
}

// intercept is the redirect a vault needs.
func (s *Service) intercept(v *vault.Vault) nft.Intercept {
	var in nft.Intercept
	if s.cfg.GateListen != "none" {
		if ap, err := netip.ParseAddrPort(s.cfg.GateListen); err == nil {
			in.GatePort, in.GatePorts = ap.Port(), gatePorts()
		}
	}
	if v == nil || len(v.Bindings) == 0 {
		return in
	}
	var ports []uint16
	for _, p := range v.Ports() {
		ports = append(ports, uint16(p))
	}
	hosts := v.Hosts()
	_, port, _ := net.SplitHostPort(s.cfg.VaultListen)
	pp, _ := netip.ParseAddrPort("127.0.0.1:" + port)
	in.ProxyPort, in.Ports = pp.Port(), ports
	in.Bound = func(name string) bool {
		return slices.ContainsFunc(hosts, func(h string) bool { return vault.HostMatches(h, name) })
	}
	return in
}

// setVault persists v (nil deletes), programs the redirect, then swaps.
func (s *Service) setVault(v *vault.Vault) error {
	path := filepath.Join(s.cfg.VaultDir, vaultFile)
	if v == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	} else {
		b, _ := json.Marshal(v)
		if err := writeFileSync(path, b); err != nil {
			return err
		}
	}
	if err := s.enf.SetIntercept(s.intercept(v)); err != nil {
		return err
	}
	s.vault.Store(v)
	return nil
}

// coveredByPolicy checks that every bound host is allowed by an explicit
// rule: a binding never opens a host by itself.
func coveredByPolicy(c *policy.Compiled, v vault.Vault) error {
	for _, h := range v.Hosts() {
		probe := h
		if rest, ok := strings.CutPrefix(h, "*."); ok {
			probe = "corral-probe." + rest
		}
		if d := c.DecideName(probe); !d.Allow || d.Rule < 0 {
			return fmt.Errorf("%w: host %q of a binding is not allowed by an explicit egress rule; allow it first", vault.ErrInvalid, h)
		}
	}
	return nil
}

// serveVault serves /credential-vault and its sub-resources.
func (s *Service) serveVault(w http.ResponseWriter, r *http.Request) {
	if s.ca == nil {
		http.Error(w, "the credential proxy is not enabled for this sandbox (create it with credentialProxy.enabled and a networkPolicy)", http.StatusPreconditionFailed)
		return
	}
	write := r.Method != http.MethodGet && r.Method != http.MethodHead
	if write && !remoteIsLoopback(r) && r.TLS == nil {
		http.Error(w, "credential vault writes must arrive over TLS or loopback", http.StatusUpgradeRequired)
		return
	}
	sub := strings.TrimPrefix(r.URL.Path, "/credential-vault")
	if sub != "" && r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s.vaultMu.Lock()
	defer s.vaultMu.Unlock()
	cur := s.vault.Load()
	if cur == nil && !(sub == "" && r.Method == http.MethodPost) {
		http.Error(w, "no credential vault: create one with POST /credential-vault", http.StatusNotFound)
		return
	}
	switch {
	case sub == "/credentials":
		writeJSON(w, http.StatusOK, map[string]any{"revision": cur.Revision, "credentials": cur.CredentialList()})
	case strings.HasPrefix(sub, "/credentials/"):
		writeNamed(w, "credential", strings.TrimPrefix(sub, "/credentials/"), cur.CredentialList(),
			func(c vault.CredentialMetadata) string { return c.Name })
	case sub == "/bindings":
		writeJSON(w, http.StatusOK, map[string]any{"revision": cur.Revision, "bindings": cur.BindingList()})
	case strings.HasPrefix(sub, "/bindings/"):
		writeNamed(w, "binding", strings.TrimPrefix(sub, "/bindings/"), cur.BindingList(),
			func(b vault.BindingMetadata) string { return b.Name })
	case sub != "":
		http.Error(w, "not found", http.StatusNotFound)
	case r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, cur.State())
	case r.Method == http.MethodDelete:
		if err := s.setVault(nil); err != nil {
			s.log.ErrorContext(r.Context(), "delete the vault", "err", err)
			http.Error(w, "could not delete the vault", http.StatusInternalServerError)
			return
		}
		s.log.InfoContext(r.Context(), "credential vault deleted")
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost || r.Method == http.MethodPatch:
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
		if err != nil || len(body) > 1<<20 {
			http.Error(w, "the body is unreadable or larger than 1 MiB", http.StatusRequestEntityTooLarge)
			return
		}
		var next vault.Vault
		status := http.StatusOK
		if r.Method == http.MethodPost {
			if cur != nil {
				http.Error(w, "a credential vault exists; change it with PATCH or delete it first", http.StatusConflict)
				return
			}
			var req vault.CreateRequest
			if req, err = vault.DecodeCreate(body); err == nil {
				next, err = vault.Create(req)
			}
			status = http.StatusCreated
		} else {
			var req vault.MutationRequest
			if err = vault.Decode(body, &req); err == nil {
				next, err = cur.Mutate(req)
			}
		}
		if err == nil {
			err = coveredByPolicy(s.cur.Load(), next)
		}
		if err != nil {
			http.Error(w, err.Error(), vaultStatus(err))
			return
		}
		if err := s.setVault(&next); err != nil {
			s.log.ErrorContext(r.Context(), "apply the vault", "err", err)
			http.Error(w, "could not apply the vault", http.StatusInternalServerError)
			return
		}
		s.log.InfoContext(r.Context(), "credential vault changed", "revision", next.Revision, "bindings", len(next.Bindings))
		writeJSON(w, status, next.State())
	default:
		w.Header().Set("Allow", "GET, POST, PATCH, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// writeNamed answers the item of list called name, or 404.
func writeNamed[T any](w http.ResponseWriter, kind, name string, list []T, nameOf func(T) string) {
	for _, x := range list {
		if nameOf(x) == name {
			writeJSON(w, http.StatusOK, x)
			return
		}
	}
	http.Error(w, "no "+kind+" "+name, http.StatusNotFound)
}

func vaultStatus(err error) int {
	switch {
	case errors.Is(err, vault.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, vault.ErrNotFound):
		return http.StatusNotFound
	default:
		return http.StatusBadRequest
	}
}

func remoteIsLoopback(r *http.Request) bool {
	if r.RemoteAddr == "" || r.RemoteAddr == "@" {
		return true // the host's Unix socket
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && ap.Addr().IsLoopback()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeFileSync replaces path with b atomically and durably, 0600.
func writeFileSync(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
