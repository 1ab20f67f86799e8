// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// How endpoints reach a sandbox's ports (Config.Endpoints).
const (
	// EndpointsAuto is pod addresses inside a cluster, port-forwards
	// outside.
	EndpointsAuto = "auto"
	// EndpointsPod is the pod's address: for servers in the cluster or on
	// its nodes.
	EndpointsPod = "pod"
	// EndpointsPortForward is a loopback listener per sandbox and port
	// that tunnels through the API server (as kubectl port-forward).
	EndpointsPortForward = "port-forward"
)

// forwards are the running port-forwards, by sandbox and port.
type forwards struct {
	mu sync.Mutex
	m  map[fwdKey]*portFwd
}

type fwdKey struct {
	id, pod string
	port    int
}

type portFwd struct {
	addr   netip.AddrPort
	cancel context.CancelFunc
	done   chan struct{}
}

// portForward returns a loopback address forwarding to port of the pod,
// starting the forward on first use and again after it ended.
func (d *Driver) portForward(ctx context.Context, id, pod string, port int) (netip.AddrPort, error) {
	key := fwdKey{id: id, pod: pod, port: port}
	d.fwd.mu.Lock()
	defer d.fwd.mu.Unlock()
	if f := d.fwd.m[key]; f != nil {
		select {
		case <-f.done:
		default:
			return f.addr, nil
		}
	}
	u, err := url.Parse(d.cfg.REST.Host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/portforward", d.cfg.Namespace, pod)
	rt, upgrader, err := spdy.RoundTripperFor(d.cfg.REST)
	if err != nil {
		return netip.AddrPort{}, err
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	fctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	// What goes wrong later (a pod gone) ends ForwardPorts; the next
	// Endpoint starts a new forward.
	pf, err := portforward.NewOnAddressesWithContext(fctx, dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, ready, io.Discard, io.Discard)
	if err != nil {
		cancel()
		return netip.AddrPort{}, err
	}
	f := &portFwd{cancel: cancel, done: make(chan struct{})}
	failed := make(chan error, 1)
	go func() {
		defer close(f.done)
		failed <- pf.ForwardPorts()
	}()
	select {
	case <-ready:
	case err := <-failed:
		cancel()
		return netip.AddrPort{}, forwardErr(id, port, err)
	case <-ctx.Done():
		cancel()
		return netip.AddrPort{}, ctx.Err()
	case <-time.After(30 * time.Second):
		cancel()
		return netip.AddrPort{}, errdefs.Newf(errdefs.ErrUnavailable, api.CodeSandboxPortForwardFailed, "port-forward to sandbox %s port %d: not ready in 30 s", id, port)
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) == 0 {
		cancel()
		return netip.AddrPort{}, forwardErr(id, port, err)
	}
	f.addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), ports[0].Local)
	if d.fwd.m == nil {
		d.fwd.m = map[fwdKey]*portFwd{}
	}
	d.fwd.m[key] = f
	return f.addr, nil
}

// stopForwards ends the port-forwards of sandbox id, or of all if id is "".
func (d *Driver) stopForwards(id string) {
	d.fwd.mu.Lock()
	defer d.fwd.mu.Unlock()
	for k, f := range d.fwd.m {
		if id == "" || k.id == id {
			f.cancel()
			<-f.done
			delete(d.fwd.m, k)
		}
	}
}

// forwardErr is a failed port-forward; the cluster's words stay in the
// log.
func forwardErr(id string, port int, err error) error {
	return errdefs.Wrap(errdefs.ErrUnavailable, api.CodeSandboxPortForwardFailed,
		fmt.Sprintf("port-forward to sandbox %s port %d failed (details are in the server log)", id, port), err)
}
