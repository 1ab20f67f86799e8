// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/corral-dev/corral/internal/egress/policy"
)

// metadataAddrs are the clouds' instance-metadata services, which no
// operator range allows back.
var metadataAddrs = []netip.Prefix{
	netip.MustParsePrefix("169.254.169.254/32"),
	netip.MustParsePrefix("100.100.100.200/32"),
	netip.MustParsePrefix("168.63.129.16/32"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
}

// ErrAddressRefused is the cause of a delivery, or a subscription,
// refused for the address its name resolved to.
var ErrAddressRefused = errors.New("address not allowed")

// Guard decides which addresses webhooks may reach: any but the egress
// policy's always-deny set (loopback, link-local, private networks,
// multicast...), less the ranges the operator allowed back; never a
// metadata service.
type Guard struct {
	allow []netip.Prefix
}

// NewGuard returns a Guard allowing allow back (loopback and private
// ranges an operator's receivers live in). A range that holds a metadata
// address is refused.
func NewGuard(allow []netip.Prefix) (*Guard, error) {
	for _, a := range allow {
		for _, m := range metadataAddrs {
			if a.Overlaps(m) {
				return nil, fmt.Errorf("%s holds the metadata address %s, which webhooks never reach", a, m.Addr())
			}
		}
	}
	return &Guard{allow: allow}, nil
}

// Check returns nil for an address webhooks may reach.
func (g *Guard) Check(a netip.Addr) error {
	a = a.Unmap()
	for _, m := range metadataAddrs {
		if m.Contains(a) {
			return fmt.Errorf("%s is a metadata service: %w", a, ErrAddressRefused)
		}
	}
	for _, p := range g.allow {
		if p.Contains(a) {
			return nil
		}
	}
	for _, p := range policy.AlwaysDeny() {
		if p.Contains(a) {
			return fmt.Errorf("%s is in %s, which webhooks may not reach (the operator may allow ranges with --webhook-allow-cidr): %w", a, p, ErrAddressRefused)
		}
	}
	return nil
}

// control is a net.Dialer's Control: it sees the address a connection is
// about to be made to, after any resolution, and refuses it before a
// packet is sent.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook: dial %q: %w", address, err)
	}
	return g.Check(ap.Addr())
}

// CheckName resolves host (a name or an address) with r and returns an
// error if it has no address or any address is refused.
func (g *Guard) CheckName(ctx context.Context, r *net.Resolver, host string) error {
	if a, err := netip.ParseAddr(host); err == nil {
		return g.Check(a)
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("%s does not resolve: %w", host, err)
	}
	for _, a := range addrs {
		if err := g.Check(a); err != nil {
			return fmt.Errorf("%s resolves to %w", host, err)
		}
	}
	return nil
}
