// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sdk"
	"github.com/corral-dev/corral/sse"
)

// execd talks to one sandbox's execd through its endpoint.
type execd struct {
	t     *testing.T
	base  string
	token string
	// sdk is the same sandbox through the SDK, whose streams reattach by
	// cursor if the connection is cut.
	sdk *sdk.Sandbox
}

func sandboxExecd(t *testing.T, c *sdk.Client, id string) *execd {
	t.Helper()
	ep, err := c.GetEndpoint(ctx(t), id, api.ExecdPort, false)
	if err != nil {
		t.Fatalf("endpoint: %v", err)
	}
	x, err := c.Sandbox(ctx(t), id, sdk.SandboxOptions{})
	if err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	return &execd{t: t, base: "http://" + ep.Endpoint, token: ep.Headers[api.HeaderExecdToken], sdk: x}
}

func (e *execd) req(method, path string, body io.Reader, ctype string) *http.Response {
	e.t.Helper()
	r, err := http.NewRequestWithContext(ctx(e.t), method, e.base+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	r.Header.Set(api.HeaderExecdToken, e.token)
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// run runs a foreground command and returns stdout, stderr and exit code.
func (e *execd) run(command string, extra ...map[string]any) (string, string, int) {
	e.t.Helper()
	body := map[string]any{"command": command}
	for _, x := range extra {
		for k, v := range x {
			body[k] = v
		}
	}
	b, _ := json.Marshal(body)
	res := e.req("POST", "/command", bytes.NewReader(b), "application/json")
	defer res.Body.Close()
	if res.StatusCode != 200 {
		msg, _ := io.ReadAll(res.Body)
		e.t.Fatalf("POST /command = %d %s", res.StatusCode, msg)
	}
	var out, errOut strings.Builder
	code := -1
	rd := sse.NewReader(res.Body)
	for {
		raw, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			e.t.Fatal(err)
		}
		var ev api.ServerStreamEvent
		_ = json.Unmarshal(raw, &ev)
		switch ev.Type {
		case api.EventStdout:
			out.WriteString(ev.Text + "\n")
		case api.EventStderr:
			errOut.WriteString(ev.Text + "\n")
		case api.EventExecutionComplete:
			code = 0
		case api.EventError:
			code, _ = strconv.Atoi(ev.Error.EValue)
		}
	}
	return out.String(), errOut.String(), code
}

func (e *execd) upload(path string, content []byte) {
	e.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	w, _ := mw.CreateFormFile("metadata", "metadata")
	fmt.Fprintf(w, `{"path":%q,"mode":644}`, path)
	w, _ = mw.CreateFormFile("file", "file")
	_, _ = w.Write(content)
	_ = mw.Close()
	res := e.req("POST", "/files/upload", &buf, mw.FormDataContentType())
	res.Body.Close()
	if res.StatusCode != 200 {
		e.t.Fatalf("upload = %d", res.StatusCode)
	}
}

func (e *execd) download(path string) []byte {
	e.t.Helper()
	res := e.req("GET", "/files/download?path="+url.QueryEscape(path), nil, "")
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		e.t.Fatalf("download = %d %s", res.StatusCode, b)
	}
	return b
}
