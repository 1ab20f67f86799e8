// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"time"

	"github.com/corral-dev/corral/api"
)

// newTicker is the metrics watch period.
func newTicker() *time.Ticker { return time.NewTicker(time.Second) }

// localProxy forwards /proxy/{port}/... to 127.0.0.1:{port} inside the
// sandbox, with pooled connections, streaming and upgrades.
type localProxy struct {
	s  *Server
	rp *httputil.ReverseProxy
}

type proxyPortKey struct{}

func newLocalProxy(s *Server) *localProxy {
	p := &localProxy{s: s}
	p.rp = &httputil.ReverseProxy{
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		},
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			port := pr.In.Context().Value(proxyPortKey{}).(int)
			host := "127.0.0.1:" + strconv.Itoa(port)
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", host
			pr.Out.URL.Path, pr.Out.URL.RawPath = "/"+pr.In.PathValue("path"), ""
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
			pr.Out.Host = host
			pr.SetXForwarded()
			// The access token is execd's; the service on the port never
			// sees it.
			pr.Out.Header.Del(api.HeaderExecdToken)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return
			}
			writeJSON(w, http.StatusBadGateway, api.ErrorResponse{Code: api.CodeExecdProxyUpstream,
				Message: "nothing answered on 127.0.0.1:" + r.PathValue("port") + " inside the sandbox"})
		},
	}
	return p
}

func (p *localProxy) serve(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		writeError(w, badRequest("port %q: must be a whole number from 1 to 65535", r.PathValue("port")))
		return
	}
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), proxyPortKey{}, port)))
}
