// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package uplink gives sandbox network namespaces a route out: a bridge
// in the uplink namespace (the host's, or one a test made), one veth per
// sandbox with an address from the bridge's subnet and a default route
// through it, and NAT for what leaves the subnet. Everything is programmed
// through netlink. The bridge's ports are isolated from one another, and
// the uplink drops whatever a sandbox sends to the uplink itself, so
// neither other sandboxes nor the host are reachable over the bridge
// even if a sandbox's own egress rules were gone.
package uplink

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral/internal/hostnet/netns"
)

// Defaults of Config.
const (
	DefaultBridge = "corral0"
	tableName     = "corral_uplink"
	// SandboxLink is the interface name inside a sandbox.
	SandboxLink = "eth0"
)

// DefaultSubnet is the sandboxes' subnet unless configured.
var DefaultSubnet = netip.MustParsePrefix("10.213.0.0/16")

// Config configures an Uplink.
type Config struct {
	// Netns is the uplink namespace; "" is the calling process's own.
	Netns string
	// Bridge is the bridge's name (default corral0).
	Bridge string
	// Subnet is the sandboxes' IPv4 subnet; its first address is the
	// bridge's (default 10.213.0.0/16).
	Subnet netip.Prefix
}

// Uplink owns the bridge and hands out addresses.
type Uplink struct {
	cfg Config
	gw  netip.Addr
	h   *netlink.Handle

	// mu guards used and next.
	mu   sync.Mutex
	used map[netip.Addr]string
	next netip.Addr
}

// Open makes sure the bridge, its address, forwarding and NAT are in
// place in the uplink namespace; it is idempotent.
func Open(cfg Config) (*Uplink, error) {
	if cfg.Bridge == "" {
		cfg.Bridge = DefaultBridge
	}
	if !cfg.Subnet.IsValid() {
		cfg.Subnet = DefaultSubnet
	}
	cfg.Subnet = cfg.Subnet.Masked()
	if !cfg.Subnet.Addr().Is4() || cfg.Subnet.Bits() > 28 {
		return nil, fmt.Errorf("uplink: subnet %s: want an IPv4 prefix of /28 or wider", cfg.Subnet)
	}
	u := &Uplink{cfg: cfg, gw: cfg.Subnet.Addr().Next(), used: map[netip.Addr]string{}}
	u.next = u.gw.Next()
	var err error
	if cfg.Netns == "" {
		u.h, err = netlink.NewHandle()
	} else {
		var ns vnetns.NsHandle
		if ns, err = vnetns.GetFromPath(cfg.Netns); err == nil {
			u.h, err = netlink.NewHandleAt(ns)
			ns.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("uplink: netlink: %w", err)
	}
	if err := u.setup(); err != nil {
		u.h.Close()
		return nil, fmt.Errorf("uplink: %w", err)
	}
	return u, nil
}

func (u *Uplink) setup() error {
	br, err := u.h.LinkByName(u.cfg.Bridge)
	if err != nil {
		if !isNotFound(err) {
			return err
		}
		if err := u.h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: u.cfg.Bridge}}); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("add bridge %s: %w", u.cfg.Bridge, err)
		}
		if br, err = u.h.LinkByName(u.cfg.Bridge); err != nil {
			return err
		}
	}
	if _, ok := br.(*netlink.Bridge); !ok {
		return fmt.Errorf("%s exists and is not a bridge", u.cfg.Bridge)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: u.gw.AsSlice(), Mask: net.CIDRMask(u.cfg.Subnet.Bits(), 32)}}
	if err := u.h.AddrReplace(br, addr); err != nil {
		return fmt.Errorf("address the bridge: %w", err)
	}
	if err := u.h.LinkSetUp(br); err != nil {
		return fmt.Errorf("bring the bridge up: %w", err)
	}
	if err := u.inNetns(func() error {
		// Forwarding for the sandboxes; no IPv6 on the bridge, so no
		// link-local path to the uplink either.
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0); err != nil {
			return err
		}
		_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+u.cfg.Bridge+"/disable_ipv6", []byte("1"), 0)
		return nil
	}); err != nil {
		return fmt.Errorf("enable forwarding: %w", err)
	}
	return u.programNAT()
}

// inNetns runs fn with the calling thread in the uplink namespace.
func (u *Uplink) inNetns(fn func() error) error {
	if u.cfg.Netns == "" {
		return fn()
	}
	return netns.Do(u.cfg.Netns, fn)
}

// programNAT replaces the uplink's nftables table: what leaves the subnet
// through another interface is masqueraded, and what the sandboxes send
// to the uplink itself is dropped.
func (u *Uplink) programNAT() error {
	var opts []nftables.ConnOption
	if u.cfg.Netns != "" {
		f, err := os.Open(u.cfg.Netns)
		if err != nil {
			return err
		}
		defer f.Close()
		opts = append(opts, nftables.WithNetNSFd(int(f.Fd())))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return err
	}
	t := &nftables.Table{Name: tableName, Family: nftables.TableFamilyINet}
	// Add then delete makes the delete succeed whether or not the table
	// existed; the whole batch is one transaction.
	c.AddTable(t)
	c.DelTable(t)
	t = c.AddTable(&nftables.Table{Name: tableName, Family: nftables.TableFamilyINet})
	nat := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	input := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
	forward := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
	bridge := ifname(u.cfg.Bridge)
	lo, hi := u.cfg.Subnet.Addr().As4(), lastAddr(u.cfg.Subnet).As4()
	c.AddRule(&nftables.Rule{Table: t, Chain: nat, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: lo[:], ToData: hi[:]},
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: bridge},
		&expr.Masq{},
	}})
	c.AddRule(&nftables.Rule{Table: t, Chain: input, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: bridge},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}})
	// Nothing is routed into the sandboxes but the answers to what they
	// sent: a neighbour with a route to the subnet reaches none of them.
	c.AddRule(&nftables.Rule{Table: t, Chain: forward, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: bridge},
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}})
	c.AddRule(&nftables.Rule{Table: t, Chain: forward, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: bridge},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("program NAT: %w", err)
	}
	return nil
}

// ifname is an interface name as nftables compares it (IFNAMSIZ, padded).
func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	for i := p.Bits(); i < 32; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	return netip.AddrFrom4(b)
}

// Gateway is the bridge's address, the sandboxes' default route.
func (u *Uplink) Gateway() netip.Addr { return u.gw }

// Subnet is the sandboxes' subnet.
func (u *Uplink) Subnet() netip.Prefix { return u.cfg.Subnet }

// Close releases the netlink handle; the bridge and veths stay.
func (u *Uplink) Close() { u.h.Close() }

// HostPrefixes are the uplink namespace's own addresses, as host routes:
// what a sandbox must never reach (the host, and the corral server on it).
func (u *Uplink) HostPrefixes() ([]netip.Prefix, error) {
	addrs, err := u.h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("uplink: list addresses: %w", err)
	}
	var out []netip.Prefix
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.IsLoopback() {
			continue
		}
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return out, nil
}

// hostLink is the uplink-side name of a sandbox's veth.
func hostLink(id string) string {
	h := strings.ReplaceAll(id, "-", "")
	if len(h) > 12 {
		h = h[:12]
	}
	if _, err := hex.DecodeString(h); err != nil || len(h) < 12 {
		h = hex.EncodeToString([]byte(id))
		if len(h) > 12 {
			h = h[:12]
		}
	}
	return "cr" + h
}

// Reserve marks addr as held by sandbox id (after a restart).
func (u *Uplink) Reserve(id string, addr netip.Addr) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.cfg.Subnet.Contains(addr) {
		return fmt.Errorf("uplink: %s is outside %s", addr, u.cfg.Subnet)
	}
	if other, ok := u.used[addr]; ok && other != id {
		return fmt.Errorf("uplink: %s is already held by %s", addr, other)
	}
	u.used[addr] = id
	return nil
}

func (u *Uplink) allocate(id string) (netip.Addr, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	last := lastAddr(u.cfg.Subnet)
	a := u.next
	for range 1 << (32 - u.cfg.Subnet.Bits()) {
		if a == last || !u.cfg.Subnet.Contains(a) {
			a = u.gw.Next()
		}
		if _, taken := u.used[a]; !taken {
			u.used[a] = id
			u.next = a.Next()
			return a, nil
		}
		a = a.Next()
	}
	return netip.Addr{}, fmt.Errorf("uplink: no free address left in %s", u.cfg.Subnet)
}

func (u *Uplink) release(addr netip.Addr, id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.used[addr] == id {
		delete(u.used, addr)
	}
}

// Attach links the sandbox namespace at nsPath to the bridge: a veth
// whose sandbox end is eth0 with a fresh address and the default route.
func (u *Uplink) Attach(id, nsPath string) (addr netip.Addr, err error) {
	if addr, err = u.allocate(id); err != nil {
		return netip.Addr{}, err
	}
	defer func() {
		if err != nil {
			_ = u.Detach(id, addr)
		}
	}()
	ns, err := vnetns.GetFromPath(nsPath)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("uplink: sandbox namespace: %w", err)
	}
	defer ns.Close()
	br, err := u.h.LinkByName(u.cfg.Bridge)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("uplink: bridge: %w", err)
	}
	name := hostLink(id)
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: name, MasterIndex: br.Attrs().Index},
		PeerName:      SandboxLink,
		PeerNamespace: netlink.NsFd(int(ns)),
	}
	if err := u.h.LinkAdd(veth); err != nil {
		return netip.Addr{}, fmt.Errorf("uplink: add veth %s: %w", name, err)
	}
	host, err := u.h.LinkByName(name)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("uplink: %w", err)
	}
	if err := u.h.LinkSetIsolated(host, true); err != nil {
		return netip.Addr{}, fmt.Errorf("uplink: isolate %s: %w", name, err)
	}
	_ = u.inNetns(func() error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0)
	})
	if err := u.h.LinkSetUp(host); err != nil {
		return netip.Addr{}, fmt.Errorf("uplink: %w", err)
	}
	if err := u.configureSandbox(ns, nsPath, addr); err != nil {
		return netip.Addr{}, fmt.Errorf("uplink: sandbox side: %w", err)
	}
	return addr, nil
}

func (u *Uplink) configureSandbox(ns vnetns.NsHandle, nsPath string, addr netip.Addr) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	link, err := h.LinkByName(SandboxLink)
	if err != nil {
		return err
	}
	// No IPv6 inside either: the only way out is IPv4 through the rules.
	if err := netns.Do(nsPath, func() error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/"+SandboxLink+"/disable_ipv6", []byte("1"), 0)
	}); err != nil {
		return fmt.Errorf("disable IPv6: %w", err)
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(u.cfg.Subnet.Bits(), 32)}}
	if err := h.AddrAdd(link, a); err != nil {
		return err
	}
	if err := h.LinkSetUp(link); err != nil {
		return err
	}
	return h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: u.gw.AsSlice()})
}

// Detach removes the sandbox's veth (if its namespace still holds it)
// and frees its address. It is idempotent.
func (u *Uplink) Detach(id string, addr netip.Addr) error {
	defer u.release(addr, id)
	link, err := u.h.LinkByName(hostLink(id))
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("uplink: %w", err)
	}
	if err := u.h.LinkDel(link); err != nil && !isNotFound(err) {
		return fmt.Errorf("uplink: remove %s: %w", link.Attrs().Name, err)
	}
	return nil
}

// HasLink reports whether sandbox id's veth exists on the uplink (leak
// checks use it).
func (u *Uplink) HasLink(id string) bool {
	_, err := u.h.LinkByName(hostLink(id))
	return err == nil
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT)
}
