// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package nflog reads the packets nftables rules log to an NFLOG group
// (nfnetlink_log) in a network namespace: each comes with the rule's
// prefix and the start of the packet, from which the destination is read.
// It speaks netlink directly (no libnetfilter_log).
package nflog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nfnetlink_log's message, attribute and command numbers
// (linux/netfilter/nfnetlink_log.h).
const (
	msgPacket = 0
	msgConfig = 1

	cfgCmd     = 1
	cfgMode    = 2
	cfgTimeout = 4
	cfgQThresh = 5

	cmdBind   = 1
	cmdUnbind = 2

	copyPacket = 2

	attrPayload = 9
	attrPrefix  = 10
)

// CopyRange is how much of each packet is copied: enough for the IP and
// transport headers.
const CopyRange = 80

// Packet is one logged packet.
type Packet struct {
	// Prefix is the logging rule's prefix.
	Prefix string
	// Dst is the destination address and port (port 0 when the protocol
	// has none); Proto is "tcp", "udp", "icmp", "icmpv6" or a number.
	Dst   netip.AddrPort
	Proto string
}

// Reader receives one group's packets.
type Reader struct {
	conn  *netlink.Conn
	group uint16
	// pending holds packets that arrived while Listen waited for the
	// kernel's acknowledgements: once the group is bound, logged packets
	// and acks share the socket.
	pending []Packet
}

// Listen binds group in the network namespace at nsPath; an empty path is
// the process's own namespace.
func Listen(nsPath string, group uint16) (*Reader, error) {
	cfg := &netlink.Config{}
	if nsPath != "" {
		ns, err := os.Open(nsPath)
		if err != nil {
			return nil, fmt.Errorf("nflog: %w", err)
		}
		defer ns.Close()
		cfg.NetNS = int(ns.Fd())
	}
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return nil, fmt.Errorf("nflog: %w", err)
	}
	r := &Reader{conn: conn, group: group}
	// Room for bursts: an overrun loses events.
	_ = conn.SetReadBuffer(4 << 20)
	// A group can be bound by one socket per namespace; a stale binding
	// (an enforcer that died) belongs to a closed socket and is gone, but
	// unbinding first is harmless.
	_ = r.config(attr(cfgCmd, []byte{cmdUnbind}))
	mode := make([]byte, 6)
	binary.BigEndian.PutUint32(mode, CopyRange)
	mode[4] = copyPacket
	for _, a := range [][]byte{
		attr(cfgCmd, []byte{cmdBind}),
		attr(cfgMode, mode),
		attr(cfgQThresh, binary.BigEndian.AppendUint32(nil, 1)),
		attr(cfgTimeout, binary.BigEndian.AppendUint32(nil, 1)),
	} {
		if err := r.config(a); err != nil {
			conn.Close()
			return nil, fmt.Errorf("nflog: configure group %d: %w", group, err)
		}
	}
	return r, nil
}

// attr encodes one netlink attribute.
func attr(typ uint16, data []byte) []byte {
	n := 4 + len(data)
	b := make([]byte, (n+3)&^3)
	binary.NativeEndian.PutUint16(b[0:2], uint16(n))
	binary.NativeEndian.PutUint16(b[2:4], typ)
	copy(b[4:], data)
	return b
}

func (r *Reader) config(attrs []byte) error {
	// nfgenmsg: family, version, resource id (the group, big-endian).
	data := []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, byte(r.group >> 8), byte(r.group)}
	req, err := r.conn.Send(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_ULOG<<8 | msgConfig), Flags: netlink.Request | netlink.Acknowledge},
		Data:   append(data, attrs...),
	})
	if err != nil {
		return err
	}
	// Wait for this request's acknowledgement; packets logged meanwhile
	// (the group is live from the bind on) are kept for Read. A refusal
	// arrives as an error from Receive.
	for {
		msgs, err := r.conn.Receive()
		if err != nil {
			return err
		}
		acked := false
		for _, m := range msgs {
			if m.Header.Type == netlink.Error && m.Header.Sequence == req.Header.Sequence {
				acked = true
				continue
			}
			r.pending = append(r.pending, packets([]netlink.Message{m})...)
		}
		if acked {
			return nil
		}
	}
}

// Close ends the reader; a blocked Read returns.
func (r *Reader) Close() error { return r.conn.Close() }

// Read returns the next batch of logged packets.
func (r *Reader) Read() ([]Packet, error) {
	if p := r.pending; len(p) > 0 {
		r.pending = nil
		return p, nil
	}
	msgs, err := r.conn.Receive()
	if err != nil {
		return nil, err
	}
	return packets(msgs), nil
}

// packets decodes the logged packets among msgs.
func packets(msgs []netlink.Message) []Packet {
	var out []Packet
	for _, m := range msgs {
		if m.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_ULOG<<8|msgPacket) || len(m.Data) < 4 {
			continue
		}
		p, err := parse(m.Data[4:])
		if err == nil {
			out = append(out, p)
		}
	}
	return out
}

func parse(attrs []byte) (Packet, error) {
	var p Packet
	ad, err := netlink.NewAttributeDecoder(attrs)
	if err != nil {
		return p, err
	}
	var payload []byte
	for ad.Next() {
		switch ad.Type() {
		case attrPrefix:
			p.Prefix = ad.String()
		case attrPayload:
			payload = ad.Bytes()
		}
	}
	if err := ad.Err(); err != nil {
		return p, err
	}
	dst, proto, err := Destination(payload)
	if err != nil {
		return p, err
	}
	p.Dst, p.Proto = dst, proto
	return p, nil
}

// Destination reads the destination and protocol of an IP packet.
func Destination(b []byte) (netip.AddrPort, string, error) {
	if len(b) < 1 {
		return netip.AddrPort{}, "", errors.New("nflog: empty packet")
	}
	var addr netip.Addr
	var proto byte
	var l4 []byte
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return netip.AddrPort{}, "", errors.New("nflog: short IPv4 header")
		}
		ihl := int(b[0]&0x0f) * 4
		addr = netip.AddrFrom4([4]byte(b[16:20]))
		proto = b[9]
		if ihl >= 20 && len(b) >= ihl {
			l4 = b[ihl:]
		}
	case 6:
		if len(b) < 40 {
			return netip.AddrPort{}, "", errors.New("nflog: short IPv6 header")
		}
		addr = netip.AddrFrom16([16]byte(b[24:40]))
		proto, l4 = b[6], b[40:]
	default:
		return netip.AddrPort{}, "", fmt.Errorf("nflog: IP version %d", b[0]>>4)
	}
	var port uint16
	name := fmt.Sprint(proto)
	switch proto {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP:
		name = map[byte]string{unix.IPPROTO_TCP: "tcp", unix.IPPROTO_UDP: "udp"}[proto]
		if len(l4) >= 4 {
			port = binary.BigEndian.Uint16(l4[2:4])
		}
	case unix.IPPROTO_ICMP:
		name = "icmp"
	case unix.IPPROTO_ICMPV6:
		name = "icmpv6"
	}
	return netip.AddrPortFrom(addr, port), name, nil
}
