// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package nft

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The tables Isolate and RestrictInbound own.
const (
	IsolateTable = "corral_isolate"
	InboundTable = "corral_inbound"
)

// RestrictInbound closes the calling thread's network namespace to new
// inbound connections but on loopback and to TCP ports; what leaves is
// another table's business (a remote Docker engine's sidecar polices the
// way out, and with this no other container on the engine's network
// reaches the sandbox's services).
func RestrictInbound(ports []uint16) error { return confine(InboundTable, ports, false, false) }

// Isolate closes the calling thread's network namespace to everything
// but loopback, answers to connections already made, and new inbound TCP
// connections to ports: a table with input and output chains whose
// policy is drop, IPv4 and IPv6 alike. It is for a sandbox without a
// policy on a runtime that must give it an interface (a remote Docker
// engine publishes execd through the engine's bridge): its PID 1 calls
// it before anything else runs, then gives up CAP_NET_ADMIN, so nothing
// in the sandbox can take the rules away.
func Isolate(ports []uint16) error { return confine(IsolateTable, ports, false, true) }

// IsolateOutbound is Isolate with new inbound TCP connections allowed to
// every port: nothing leaves but answers. It is for a pod without a
// policy, whose ports its endpoints reach by the pod's address (from
// outside, which only the node and the server can: every other sandbox
// is kept from initiating anything, or from private addresses).
func IsolateOutbound() error { return confine(IsolateTable, nil, true, true) }

// confine programs table with an input chain (and, when outbound, an
// output chain) that drop all but loopback, answers, and inbound TCP to
// ports (any port with anyTCP).
func confine(table string, ports []uint16, anyTCP, outbound bool) error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nft: %w", err)
	}
	t := conn.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: table})
	// Replace, never stack: flush whatever an earlier run left.
	conn.FlushTable(t)
	drop := nftables.ChainPolicyDrop
	accept := &expr.Verdict{Kind: expr.VerdictAccept}
	established := []expr.Any{&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}}, accept}
	for _, hook := range []struct {
		name  string
		hook  *nftables.ChainHook
		iface expr.MetaKey
	}{{"input", nftables.ChainHookInput, expr.MetaKeyIIFNAME}, {"output", nftables.ChainHookOutput, expr.MetaKeyOIFNAME}} {
		if hook.name == "output" && !outbound {
			continue
		}
		ch := conn.AddChain(&nftables.Chain{Name: hook.name, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: hook.hook, Priority: nftables.ChainPriorityFilter, Policy: &drop})
		conn.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
			&expr.Meta{Key: hook.iface, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname("lo")}, accept}})
		conn.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: established})
		// IPv6 neighbour discovery, which never leaves the link: without
		// it no IPv6 connection, even to a listed port, is made.
		for _, typ := range []byte{133, 134, 135, 136} {
			conn.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_ICMPV6}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{typ}}, accept}})
		}
		if hook.name != "input" {
			continue
		}
		if anyTCP {
			conn.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}}, accept}})
		}
		for _, port := range ports {
			conn.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)}, accept}})
		}
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("nft: confine the namespace (%s): %w", table, err)
	}
	return nil
}

// ParsePorts reads a comma-separated list of TCP ports from 1 to 65535,
// as Isolate and RestrictInbound take them; ok is false for anything
// else, an empty item included.
func ParsePorts(s string) (ports []uint16, ok bool) {
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
		if err != nil || n == 0 {
			return nil, false
		}
		ports = append(ports, uint16(n))
	}
	return ports, true
}
