// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package nflog

import (
	"testing"
)

func TestDestination(t *testing.T) {
	v4 := make([]byte, 24)
	v4[0], v4[9] = 0x45, 6 // IPv4, IHL 5, TCP
	copy(v4[16:20], []byte{203, 0, 113, 10})
	v4[22], v4[23] = 0x1f, 0x90 // port 8080
	v6 := make([]byte, 44)
	v6[0], v6[6] = 0x60, 17 // IPv6, UDP
	v6[24], v6[25], v6[39] = 0x20, 0x01, 1
	v6[42], v6[43] = 0, 53
	icmp := make([]byte, 20)
	icmp[0], icmp[9] = 0x45, 1
	copy(icmp[16:20], []byte{10, 0, 0, 1})
	for _, tc := range []struct {
		pkt         []byte
		dst, proto  string
		wantFailure bool
	}{
		{pkt: v4, dst: "203.0.113.10:8080", proto: "tcp"},
		{pkt: v6, dst: "[2001::1]:53", proto: "udp"},
		{pkt: icmp, dst: "10.0.0.1:0", proto: "icmp"},
		{pkt: v4[:10], wantFailure: true},
		{pkt: v6[:30], wantFailure: true},
		{pkt: []byte{0x55}, wantFailure: true},
		{pkt: nil, wantFailure: true},
	} {
		dst, proto, err := Destination(tc.pkt)
		if tc.wantFailure {
			if err == nil {
				t.Errorf("% x: no error", tc.pkt)
			}
			continue
		}
		if err != nil || dst.String() != tc.dst || proto != tc.proto {
			t.Errorf("% x = %s %s %v, want %s %s", tc.pkt, dst, proto, err, tc.dst, tc.proto)
		}
	}
}

func FuzzDestination(f *testing.F) {
	f.Add([]byte{0x45, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 80})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = Destination(b)
	})
}
