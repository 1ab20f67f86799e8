// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package testutil

import (
	"crypto/tls"
	"testing"

	"github.com/corral-dev/corral/internal/egress/mitm"
)

// TestCA is a certificate authority a test made (the same kind the
// credential proxy gives each sandbox).
type TestCA struct {
	PEM []byte
	ca  *mitm.CA
}

// NewTestCA makes a CA.
func NewTestCA(t testing.TB, name string) *TestCA {
	t.Helper()
	dir := t.TempDir()
	if err := mitm.CreateCA(dir, name); err != nil {
		t.Fatal(err)
	}
	ca, err := mitm.LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &TestCA{PEM: ca.CertPEM(), ca: ca}
}

// Issue signs a server certificate for host.
func (ca *TestCA) Issue(t testing.TB, host string) tls.Certificate {
	t.Helper()
	c, err := ca.ca.Leaf(host)
	if err != nil {
		t.Fatal(err)
	}
	return *c
}
