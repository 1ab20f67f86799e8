// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package netlab

import (
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/corral-dev/corral/internal/hostnet/netns"
)

// listenIn runs listen inside the namespace ns ("" is the test's own).
func listenIn(t testing.TB, ns string, listen func() error) {
	t.Helper()
	var err error
	if ns == "" {
		err = listen()
	} else {
		err = netns.Do(NetnsPath(ns), listen)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// ServeDNS answers A queries from zone (lower-case FQDNs with the final
// dot → IPv4) over UDP and TCP at addr inside ns, NXDOMAIN for the rest,
// until the test ends. It returns the address served.
func ServeDNS(t testing.TB, ns, addr string, zone map[string]string) string {
	t.Helper()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		q := req.Question[0]
		if ip, ok := zone[strings.ToLower(q.Name)]; ok && q.Qtype == dns.TypeA {
			rr, _ := dns.NewRR(q.Name + " 120 IN A " + ip)
			m.Answer = append(m.Answer, rr)
		} else if !ok {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	var pc net.PacketConn
	var ln net.Listener
	listenIn(t, ns, func() error {
		var err error
		if pc, err = net.ListenPacket("udp", addr); err != nil {
			return err
		}
		ln, err = net.Listen("tcp", pc.LocalAddr().String())
		return err
	})
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		go func() { _ = s.ActivateAndServe() }()
		t.Cleanup(func() { _ = s.Shutdown() })
	}
	return pc.LocalAddr().String()
}

// ServeHTTPIn serves h at addr inside ns until the test ends; with
// certs, over TLS.
func ServeHTTPIn(t testing.TB, ns, addr string, h http.Handler, certs ...tls.Certificate) {
	t.Helper()
	var ln net.Listener
	listenIn(t, ns, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if len(certs) > 0 {
		ln = tls.NewListener(ln, &tls.Config{Certificates: certs})
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}
