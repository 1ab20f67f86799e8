// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package netlab

import (
	"crypto/tls"
	"testing"

	"github.com/corral-dev/corral/internal/egress/mitm"
)

// CA is a certificate authority a test made (the same kind the
// credential proxy gives each sandbox), for a world's TLS servers.
type CA struct {
	PEM []byte
	ca  *mitm.CA
}

// NewCA makes a CA.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	dir := t.TempDir()
	if err := mitm.CreateCA(dir, name); err != nil {
		t.Fatal(err)
	}
	ca, err := mitm.LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{PEM: ca.CertPEM(), ca: ca}
}

// Issue signs a server certificate for host.
func (ca *CA) Issue(t testing.TB, host string) tls.Certificate {
	t.Helper()
	c, err := ca.ca.Leaf(host)
	if err != nil {
		t.Fatal(err)
	}
	return *c
}
