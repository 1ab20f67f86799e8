// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package nft enforces an egress policy at L3 in a network namespace with
// nftables, through netlink (no nft binary). One table, rebuilt atomically
// on every policy change, holds an output chain whose policy is the
// policy's default action and, in order: established traffic and loopback
// (redirects to the credential proxy included) pass; DNS to any resolver but the proxy
// is dropped; the always-deny set and the rules' denied ranges drop; the
// addresses the DNS proxy resolved for allowed names (with their TTLs)
// and the rules' allowed ranges pass. IP and CIDR rules keep their
// first-match order: each rule decides only the part of its range no
// earlier rule decided.
package nft

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/egress/policy"
)

// TableName is the table the enforcer owns.
const TableName = "corral_egress"

// AuditGroup is the NFLOG group every decision on a new connection is
// logged to, with one of the Log* prefixes (internal/egress/nflog reads
// it).
const AuditGroup = 0x6372

// The prefixes of logged decisions.
const (
	LogDenyDNS   = "deny:dns"   // DNS to a resolver other than the proxy
	LogDenyRange = "deny:range" // the always-deny set or a denied IP/CIDR rule
	LogAllowDyn  = "allow:dns"  // an address resolved for an allowed name
	LogAllowRule = "allow:range"
	LogDefault   = "default" // no rule matched: the default action
)

// logAs is a log expression for the audit group.
func logAs(prefix string) *expr.Log {
	return &expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_PREFIX | 1<<unix.NFTA_LOG_QTHRESHOLD,
		Group: AuditGroup, QThreshold: 1, Data: []byte(prefix)}
}

// Enforcer programs one network namespace.
type Enforcer struct {
	mu   sync.Mutex
	ns   *os.File
	conn *nftables.Conn
	pol  *policy.Compiled
	// dyn remembers what the DNS proxy allowed — for each address, every
	// name it was handed out for and until when — so a policy change
	// keeps the addresses of names still allowed.
	dyn map[netip.Addr]map[string]time.Time
	// intercept is the credential proxy's redirect (zero: none).
	intercept Intercept
	// exempt is the socket mark of the enforcer's own connections (0:
	// none).
	exempt uint32
}

// Exempt lets packets carrying socket mark m through, whatever the
// policy: the enforcer's own upstream queries when it runs inside the
// namespace it confines (a pod's sidecar). Setting a mark takes
// CAP_NET_ADMIN or CAP_NET_RAW, which sandboxes do not have. Call it
// before Apply.
func (e *Enforcer) Exempt(m uint32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.exempt = m
}

// Intercept sends the sandbox's TCP connections to the addresses of
// bound hosts, on the bound ports, to the credential proxy.
type Intercept struct {
	// ProxyPort is where the proxy listens on the sandbox's loopback.
	ProxyPort uint16
	// Ports are the destination ports intercepted.
	Ports []uint16
	// Bound reports whether a name is one of the vault's hosts; its
	// resolved IPv4 addresses are intercepted.
	Bound func(name string) bool
	// GatePort, when set, is where the name gate (internal/egress/namegate)
	// listens on the sandbox's loopback (IPv4 and IPv6): new TCP
	// connections to GatePorts of any address resolved for a name go
	// there, after the vault's, so an address shared by several sites
	// opens only the allowed one.
	GatePort  uint16
	GatePorts []uint16
}

// New returns an enforcer for the network namespace at nsPath; an empty
// path is the process's own namespace.
func New(nsPath string) (*Enforcer, error) {
	if nsPath == "" {
		conn, err := nftables.New(nftables.AsLasting())
		if err != nil {
			return nil, fmt.Errorf("nft: %w", err)
		}
		return &Enforcer{conn: conn, dyn: map[netip.Addr]map[string]time.Time{}}, nil
	}
	ns, err := os.Open(nsPath)
	if err != nil {
		return nil, fmt.Errorf("nft: %w", err)
	}
	// One lasting socket, opened in the namespace now: later changes
	// need no setns (the enforcer drops CAP_SYS_ADMIN once it serves).
	conn, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())), nftables.AsLasting())
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("nft: %w", err)
	}
	return &Enforcer{ns: ns, conn: conn, dyn: map[netip.Addr]map[string]time.Time{}}, nil
}

// Close releases the namespace handle and the socket; the rules stay.
func (e *Enforcer) Close() error {
	_ = e.conn.CloseLasting()
	if e.ns == nil {
		return nil
	}
	return e.ns.Close()
}

// span is an inclusive address range of one family.
type span struct{ lo, hi netip.Addr }

func prefixSpan(p netip.Prefix) span {
	p = p.Masked()
	lo := p.Addr()
	b := lo.AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	hi, _ := netip.AddrFromSlice(b)
	return span{lo, hi}
}

// subtract returns the parts of s outside the sorted, disjoint covered.
func subtract(s span, covered []span) []span {
	var out []span
	cur := s.lo
	for _, c := range covered {
		if c.hi.Less(cur) || s.hi.Less(c.lo) {
			continue
		}
		if cur.Less(c.lo) {
			out = append(out, span{cur, c.lo.Prev()})
		}
		if !c.hi.Less(s.hi) {
			return out
		}
		cur = c.hi.Next()
	}
	return append(out, span{cur, s.hi})
}

// insert adds s to the sorted, disjoint list, merging neighbours.
func insert(list []span, s span) []span {
	list = append(list, s)
	sort.Slice(list, func(i, j int) bool { return list[i].lo.Less(list[j].lo) })
	out := list[:0:0]
	for _, x := range list {
		if n := len(out); n > 0 && (!out[n-1].hi.Less(x.lo) || out[n-1].hi.Next() == x.lo) {
			if out[n-1].hi.Less(x.hi) {
				out[n-1].hi = x.hi
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

// ranges splits the policy's IP and CIDR rules into disjoint allowed and
// denied ranges per family, honouring first-match order.
func ranges(c *policy.Compiled) (allow, deny [2][]span) {
	var decided [2][]span
	fam := func(a netip.Addr) int {
		if a.Is4() {
			return 0
		}
		return 1
	}
	for _, r := range c.Policy().Egress {
		p, err := netip.ParsePrefix(r.Target)
		if err != nil {
			a, aerr := netip.ParseAddr(r.Target)
			if aerr != nil {
				continue // a domain rule: the DNS proxy's business
			}
			a = a.Unmap()
			p = netip.PrefixFrom(a, a.BitLen())
		}
		s := prefixSpan(p)
		f := fam(s.lo)
		for _, part := range subtract(s, decided[f]) {
			decided[f] = insert(decided[f], part)
			if r.Action == policy.Allow {
				allow[f] = insert(allow[f], part)
			} else {
				deny[f] = insert(deny[f], part)
			}
		}
	}
	for _, p := range c.DenySet() {
		s := prefixSpan(p)
		deny[fam(s.lo)] = insert(deny[fam(s.lo)], s)
	}
	return allow, deny
}

// elements turns disjoint spans into interval-set elements.
func elements(spans []span) []nftables.SetElement {
	var out []nftables.SetElement
	for _, s := range spans {
		out = append(out, nftables.SetElement{Key: s.lo.AsSlice()})
		if end := s.hi.Next(); end.IsValid() {
			out = append(out, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return out
}

// Apply replaces the namespace's rules with pol's, atomically: the old
// table and the new never both half-apply. pol's always-deny set (its
// DenySet: the built-in one, the host, the server, other sandboxes) is
// dropped whatever its rules say.
func (e *Enforcer) Apply(pol *policy.Compiled) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.apply(pol)
}

// SetIntercept changes the credential proxy's redirect and reprograms
// the table with the current policy.
func (e *Enforcer) SetIntercept(in Intercept) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.intercept = in
	if e.pol == nil {
		return nil
	}
	return e.apply(e.pol)
}

func (e *Enforcer) apply(pol *policy.Compiled) error {
	allow, deny := ranges(pol)
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName}
	// Add, delete, add: one batch that cannot fail for a missing table.
	e.conn.AddTable(t)
	e.conn.DelTable(t)
	e.conn.AddTable(t)
	// Resolved addresses survive a policy change while their name is
	// still allowed.
	now := time.Now()
	for a, names := range e.dyn {
		for name, exp := range names {
			if exp.Sub(now) <= time.Second || !pol.DecideName(name).Allow {
				delete(names, name)
			}
		}
		if len(names) == 0 {
			delete(e.dyn, a)
		}
	}
	types := [2]nftables.SetDatatype{nftables.TypeIPAddr, nftables.TypeIP6Addr}
	var allowSets, denySets, dynSets [2]*nftables.Set
	for f := range 2 {
		suffix := []string{"4", "6"}[f]
		denySets[f] = &nftables.Set{Table: t, Name: "deny" + suffix, KeyType: types[f], Interval: true}
		allowSets[f] = &nftables.Set{Table: t, Name: "allow" + suffix, KeyType: types[f], Interval: true}
		dynSets[f] = &nftables.Set{Table: t, Name: "dyn" + suffix, KeyType: types[f], HasTimeout: true}
		var dyn []nftables.SetElement
		for a, names := range e.dyn {
			if a.Is4() == (f == 0) {
				dyn = append(dyn, nftables.SetElement{Key: a.AsSlice(), Timeout: latest(names, nil).Sub(now)})
			}
		}
		for _, s := range []struct {
			set *nftables.Set
			els []nftables.SetElement
		}{{denySets[f], elements(deny[f])}, {allowSets[f], elements(allow[f])}, {dynSets[f], dyn}} {
			if err := e.conn.AddSet(s.set, s.els); err != nil {
				return err
			}
		}
	}
	chainPolicy := nftables.ChainPolicyDrop
	if pol.DefaultAllows() {
		chainPolicy = nftables.ChainPolicyAccept
	}
	ch := e.conn.AddChain(&nftables.Chain{Name: "egress", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &chainPolicy})
	add := func(exprs ...expr.Any) { e.conn.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: exprs}) }
	accept, drop := &expr.Verdict{Kind: expr.VerdictAccept}, &expr.Verdict{Kind: expr.VerdictDrop}
	// Established and related traffic passes.
	add(&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}}, accept)
	if e.exempt != 0 {
		add(&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(e.exempt)}, accept)
	}
	// Loopback passes: the proxy and the sandbox's own services live there.
	add(&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname("lo")}, accept)
	// So does a connection the intercept chain redirected to the
	// credential proxy: the hook still names the interface the packet was
	// routed to before, but its destination is loopback now (which no
	// other interface carries).
	add(&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{127}}, accept)
	add(&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV6}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: netip.IPv6Loopback().AsSlice()}, accept)
	// The kernel's own ICMPv6 on the link (neighbour discovery, MLD
	// reports to ff02::/16, sent at link-up and at random times after) is
	// dropped as the always-deny set would, but not audited: the sandbox
	// did not choose it, and it reached the audit log at unpredictable
	// moments as "connection" denials.
	add(&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV6}},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_ICMPV6}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0xff, 0x02}}, drop)
	// No other resolver: DNS anywhere else is dropped, whatever the rules.
	for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
		add(&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(53)}, logAs(LogDenyDNS), drop)
	}
	for f, proto := range []byte{unix.NFPROTO_IPV4, unix.NFPROTO_IPV6} {
		off, n := uint32(16), uint32(4)
		if f == 1 {
			off, n = 24, 16
		}
		daddr := func(set *nftables.Set, prefix string, verdict *expr.Verdict) {
			add(&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
				&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID}, logAs(prefix), verdict)
		}
		daddr(denySets[f], LogDenyRange, drop)
		daddr(dynSets[f], LogAllowDyn, accept)
		daddr(allowSets[f], LogAllowRule, accept)
	}
	// What is left meets the chain's policy, the default action.
	add(logAs(LogDefault))
	if err := e.addIntercept(t, now, dynSets, !pol.DefaultAllows()); err != nil {
		return err
	}
	if err := e.conn.Flush(); err != nil {
		return fmt.Errorf("nft: apply the policy: %w", err)
	}
	e.pol = pol
	return nil
}

// addIntercept adds the redirect of bound hosts' addresses to the proxy:
// a nat chain before the filter chain, so the filter sees the connection
// as going to loopback.
func (e *Enforcer) addIntercept(t *nftables.Table, now time.Time, dyn [2]*nftables.Set, defaultDeny bool) error {
	in := e.intercept
	vault := in.ProxyPort != 0 && len(in.Ports) > 0 && in.Bound != nil
	// Under a default allow every address is reachable anyway: there is
	// nothing for the gate to keep.
	gate := in.GatePort != 0 && len(in.GatePorts) > 0 && defaultDeny
	if !vault && !gate {
		return nil
	}
	ch := e.conn.AddChain(&nftables.Chain{Name: "intercept", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest})
	var exempt []expr.Any
	if e.exempt != 0 {
		// The proxies' own connections to the real host carry the exempt
		// mark: they must not come back to them.
		exempt = []expr.Any{&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(e.exempt)}}
	}
	redirect := func(family byte, port uint16, set *nftables.Set, to uint16) {
		off, n := uint32(16), uint32(4)
		if family == unix.NFPROTO_IPV6 {
			off, n = 24, 16
		}
		e.conn.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(slices.Clone(exempt),
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{family}},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
			&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
			&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(to)},
			&expr.Redir{RegisterProtoMin: 1},
		)})
	}
	if vault {
		if err := e.addVaultIntercept(t, now, redirect); err != nil {
			return err
		}
	}
	if gate {
		for _, port := range in.GatePorts {
			redirect(unix.NFPROTO_IPV4, port, dyn[0], in.GatePort)
			redirect(unix.NFPROTO_IPV6, port, dyn[1], in.GatePort)
		}
	}
	return nil
}

// addVaultIntercept redirects connections to the vault's hosts to its
// proxy.
func (e *Enforcer) addVaultIntercept(t *nftables.Table, now time.Time, redirect func(byte, uint16, *nftables.Set, uint16)) error {
	in := e.intercept
	set := &nftables.Set{Table: t, Name: "vault4", KeyType: nftables.TypeIPAddr, HasTimeout: true}
	var els []nftables.SetElement
	for a, names := range e.dyn {
		if exp := latest(names, in.Bound); a.Is4() && exp.Sub(now) > time.Second {
			els = append(els, nftables.SetElement{Key: a.AsSlice(), Timeout: exp.Sub(now)})
		}
	}
	if err := e.conn.AddSet(set, els); err != nil {
		return err
	}
	for _, port := range in.Ports {
		redirect(unix.NFPROTO_IPV4, port, set, in.ProxyPort)
	}
	return nil
}

// AllowResolved lets the sandbox reach the addresses the DNS proxy
// returned for an allowed name, until ttl passes.
func (e *Enforcer) AllowResolved(name string, addrs []netip.Addr, ttl time.Duration) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pol == nil {
		return fmt.Errorf("nft: no policy applied yet")
	}
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName}
	in := e.intercept
	intercepting := in.ProxyPort != 0 && len(in.Ports) > 0 && in.Bound != nil
	bound := intercepting && in.Bound(name)
	// One change per set: the elements to refresh (delete and add back
	// with the later timeout) and the new ones, all in one transaction,
	// so an address is never briefly missing or in one set without the
	// other.
	type change struct {
		set      *nftables.Set
		del, add []nftables.SetElement
	}
	changes := map[string]*change{}
	get := func(set string, typ nftables.SetDatatype) *change {
		if changes[set] == nil {
			changes[set] = &change{set: &nftables.Set{Table: t, Name: set, KeyType: typ, HasTimeout: true}}
		}
		return changes[set]
	}
	now := time.Now()
	expires := now.Add(ttl)
	n := policy.NormalizeTarget(name)
	for _, a := range addrs {
		a = a.Unmap()
		names := e.dyn[a]
		if names == nil {
			names = map[string]time.Time{}
			e.dyn[a] = names
		}
		prevDyn := latest(names, nil)
		var prevVault time.Time
		if intercepting {
			prevVault = latest(names, in.Bound)
		}
		if names[n].Before(expires) {
			names[n] = expires
		}
		dynSet, typ := "dyn6", nftables.TypeIP6Addr
		if a.Is4() {
			dynSet, typ = "dyn4", nftables.TypeIPAddr
		}
		put := func(c *change, prev, next time.Time) {
			el := nftables.SetElement{Key: a.AsSlice(), Timeout: next.Sub(now)}
			if prev.Sub(now) > time.Second {
				if !next.After(prev) {
					return // already there for longer
				}
				c.del = append(c.del, nftables.SetElement{Key: a.AsSlice()})
			}
			c.add = append(c.add, el)
		}
		put(get(dynSet, typ), prevDyn, latest(names, nil))
		if bound && a.Is4() {
			put(get("vault4", nftables.TypeIPAddr), prevVault, latest(names, in.Bound))
		}
	}
	// vault4 before dyn4: a bound address is redirected before it is
	// reachable at all.
	order := []string{"vault4", "dyn4", "dyn6"}
	queue := func(refresh bool) error {
		for _, name := range order {
			c := changes[name]
			if c == nil {
				continue
			}
			if refresh && len(c.del) > 0 {
				if err := e.conn.SetDeleteElements(c.set, c.del); err != nil {
					return err
				}
			}
			if len(c.add) > 0 {
				if err := e.conn.SetAddElements(c.set, c.add); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := queue(true); err != nil {
		return err
	}
	if err := e.conn.Flush(); err != nil {
		// An element believed present had expired in the kernel: add
		// without refreshing (what exists keeps its timeout).
		if err := queue(false); err != nil {
			return err
		}
		if err := e.conn.Flush(); err != nil {
			return fmt.Errorf("nft: allow resolved addresses: %w", err)
		}
	}
	return nil
}

// latest is the latest expiry among names (those keep accepts, if set).
func latest(names map[string]time.Time, keep func(string) bool) time.Time {
	var t time.Time
	for name, exp := range names {
		if (keep == nil || keep(name)) && exp.After(t) {
			t = exp
		}
	}
	return t
}

// ResolvedNames returns the allowed names the DNS proxy handed addr out
// for and that have not expired, sorted.
func (e *Enforcer) ResolvedNames(addr netip.Addr) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	var out []string
	for name, exp := range e.dyn[addr.Unmap()] {
		if exp.After(now) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// ifname pads an interface name as the kernel compares it.
func ifname(n string) []byte {
	b := make([]byte, 16)
	copy(b, n)
	return b
}
