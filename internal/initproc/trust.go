// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package initproc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// SystemBundles are the CA bundle files TLS libraries read on the usual
// distributions (Debian and Ubuntu, Fedora and RHEL, SUSE, Alpine).
var SystemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/ssl/cert.pem",
	"/etc/pki/tls/cacert.pem",
}

// InstallCA makes the sandbox trust the CA in caFile: it is appended to
// every system bundle that exists (once: a restarted sandbox does not add
// it again; a sandbox without any gets the Debian one), and bundle is
// written with the first system bundle's certificates plus the CA, for
// the SSL_CERT_FILE-style variables.
func InstallCA(caFile, bundle string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("trust the sandbox CA: %w", err)
	}
	ca = append(bytes.TrimSpace(ca), '\n')
	var base []byte
	found := false
	for _, p := range SystemBundles {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if !found {
			base, found = b, true
		}
		if bytes.Contains(b, ca) {
			continue
		}
		if err := appendTo(p, b, ca); err != nil {
			return fmt.Errorf("trust the sandbox CA: %s: %w", p, err)
		}
	}
	if !found {
		p := SystemBundles[0]
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("trust the sandbox CA: %w", err)
		}
		if err := os.WriteFile(p, ca, 0o644); err != nil {
			return fmt.Errorf("trust the sandbox CA: %w", err)
		}
	}
	if bytes.Contains(base, ca) {
		base = bytes.ReplaceAll(base, ca, nil)
	}
	if len(base) > 0 && base[len(base)-1] != '\n' {
		base = append(base, '\n')
	}
	if err := os.MkdirAll(filepath.Dir(bundle), 0o755); err != nil {
		return fmt.Errorf("trust the sandbox CA: %w", err)
	}
	return os.WriteFile(bundle, append(base, ca...), 0o644)
}

func appendTo(path string, old, ca []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if len(old) > 0 && old[len(old)-1] != '\n' {
		ca = append([]byte{'\n'}, ca...)
	}
	_, err = f.Write(ca)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
