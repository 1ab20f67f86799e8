// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/e2b"
	"github.com/corral-dev/corral/internal/server"
)

// e2bFlags configure the E2B-compatible API's listener (docs/e2b.md).
type e2bFlags struct {
	listen    string
	domain    string
	templates string
	tlsCert   string
	tlsKey    string
	localCA   bool
}

func (f *e2bFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "e2b-listen", "", "address to serve E2B's API on (its SDKs' E2B_API_URL and E2B_SANDBOX_URL; docs/e2b.md); default: not served")
	fs.StringVar(&f.domain, "e2b-domain", "", "wildcard domain of sandbox origins on --e2b-listen: {port}-{id}.DOMAIN reaches that sandbox port, api.DOMAIN the API (E2B_DOMAIN)")
	fs.StringVar(&f.templates, "e2b-templates", "", "E2B template ids and the images they create, comma-separated NAME=IMAGE, beside the tenants' own templates (default: code-interpreter-v1=corral/code-interpreter:local,base=host)")
	fs.StringVar(&f.tlsCert, "e2b-tls-cert", "", "certificate (PEM) to serve --e2b-listen with TLS, for *.DOMAIN and DOMAIN")
	fs.StringVar(&f.tlsKey, "e2b-tls-key", "", "private key (PEM) of --e2b-tls-cert")
	fs.BoolVar(&f.localCA, "e2b-local-ca", false, "serve --e2b-listen with TLS for *.DOMAIN from a certificate authority of this machine's, kept in DATA-DIR/e2b-ca (clients trust its ca.crt: NODE_EXTRA_CA_CERTS); for local use")
}

// config checks the flags and returns the server's E2B configuration.
func (f *e2bFlags) config() (*server.E2BConfig, error) {
	cfg := &server.E2BConfig{Templates: server.DefaultE2BTemplates()}
	if f.templates != "" {
		cfg.Templates = map[string]string{}
		for _, kv := range strings.Split(f.templates, ",") {
			name, img, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || name == "" || img == "" {
				return nil, fmt.Errorf("--e2b-templates: %q is not NAME=IMAGE", kv)
			}
			cfg.Templates[name] = img
		}
	}
	if d := strings.TrimSuffix(strings.ToLower(f.domain), "."); d != "" {
		if strings.ContainsAny(d, "/:*") || !strings.Contains(d, ".") && d != "localhost" {
			return nil, fmt.Errorf("--e2b-domain %q: want a domain name such as sandboxes.example.com", f.domain)
		}
		cfg.Domain = d
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return nil, fmt.Errorf("--e2b-tls-cert and --e2b-tls-key go together")
	}
	if f.listen == "" && (f.domain != "" || f.tlsCert != "" || f.localCA) {
		return nil, fmt.Errorf("--e2b-domain, --e2b-tls-cert and --e2b-local-ca need --e2b-listen")
	}
	if f.localCA && (f.domain == "" || f.tlsCert != "") {
		return nil, fmt.Errorf("--e2b-local-ca needs --e2b-domain, and replaces --e2b-tls-cert")
	}
	return cfg, nil
}

// serve starts the E2B listener (nil when --e2b-listen is not given) and
// returns its HTTP server, already serving.
func (f *e2bFlags) serve(srv *server.Server, dataDir string, log *slog.Logger) (*http.Server, error) {
	if f.listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return nil, fmt.Errorf("--e2b-listen: %w", err)
	}
	hs := &http.Server{Handler: srv.E2BHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 1 << 20,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	scheme := "http"
	if f.tlsCert != "" || f.localCA {
		var cert tls.Certificate
		if f.localCA {
			dir := filepath.Join(dataDir, "e2b-ca")
			cert, _, err = e2b.LocalCA(dir, strings.TrimSuffix(strings.ToLower(f.domain), "."))
			if err == nil {
				log.Info("sandbox origins use a local certificate authority: clients trust its certificate", "ca", filepath.Join(dir, "ca.crt"))
			}
		} else {
			cert, err = tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		}
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("E2B listener's TLS: %w", err)
		}
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, hs.TLSConfig)
		scheme = "https"
	}
	go func() {
		if err := hs.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Error("E2B API stopped serving", "err", err)
		}
	}()
	log.Info("serving E2B's API", "listen", scheme+"://"+ln.Addr().String(), "domain", f.domain)
	return hs, nil
}
