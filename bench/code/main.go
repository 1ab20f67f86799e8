// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command code measures the code interpreter: a real `corral execd` on
// this machine and its Python kernel (Debian's ipykernel), next to the
// same kernel driven directly by jupyter_client (Debian's
// python3-jupyter-client) in the same run:
//
//   - warm round trip of `1+1` in one context (corral: POST /code and the
//     whole event stream; direct: execute_request → reply and idle);
//
//   - first result in a new context (corral: POST /code/context then
//     `1+1`; direct: start_new_kernel then `1+1`), with the kernel's own
//     start split out;
//
//   - throughput of printed output (-stream-mb MB written by the kernel),
//     read through corral by a Python client as the direct one is, and
//     by this program.
//
//     go run ./bench/code [-n 300] [-starts 5] [-stream-mb 200] [-stream-runs 5]
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/bench/internal/benchsrv"
	"github.com/corral-dev/corral/internal/testutil/corraltest"
	"github.com/corral-dev/corral/sse"
)

func main() {
	n := flag.Int("n", 300, "warm round trips")
	starts := flag.Int("starts", 5, "new contexts to time")
	streamMB := flag.Int("stream-mb", 200, "MB of printed output to stream")
	streamRuns := flag.Int("stream-runs", 5, "streams through each path, taking turns; the medians are compared")
	bin := flag.String("binary", "", "corral binary (default: build it)")
	flag.Parse()
	if err := run(*bin, *n, *starts, *streamMB, max(1, *streamRuns)); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// direct drives the kernel with jupyter_client and prints one JSON line.
const direct = `
import json, sys, time
from jupyter_client.manager import start_new_kernel
n, starts, mb = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

def run(kc, code):
    msg_id = kc.execute(code)
    got = 0
    while True:
        m = kc.get_iopub_msg(timeout=120)
        if m['parent_header'].get('msg_id') != msg_id:
            continue
        if m['msg_type'] == 'stream':
            got += len(m['content']['text'])
        if m['msg_type'] == 'status' and m['content']['execution_state'] == 'idle':
            break
    while kc.get_shell_msg(timeout=120)['parent_header'].get('msg_id') != msg_id:
        pass
    return got

first = []
for _ in range(starts):
    t0 = time.perf_counter()
    km, kc = start_new_kernel(kernel_name='python3')
    t1 = time.perf_counter()
    run(kc, '1+1')
    t2 = time.perf_counter()
    first.append([(t1 - t0) * 1000, (t2 - t0) * 1000])
    kc.stop_channels(); km.shutdown_kernel(now=True)

km, kc = start_new_kernel(kernel_name='python3')
for _ in range(20):
    run(kc, '1+1')
rtt = []
for _ in range(n):
    t0 = time.perf_counter()
    run(kc, '1+1')
    rtt.append((time.perf_counter() - t0) * 1000)
got, secs = 0, 0.0
if mb > 0:
    code = "import sys\nfor _ in range(%d): sys.stdout.write('x' * 1000000)\nsys.stdout.flush()" % mb
    t0 = time.perf_counter()
    got = run(kc, code)
    secs = time.perf_counter() - t0
kc.stop_channels(); km.shutdown_kernel(now=True)
print(json.dumps({"rtt_ms": rtt, "first_ms": first, "stream_bytes": got, "stream_s": secs}))
`

// viaCorral streams the same printed output through corral's /code with
// a Python client (urllib, json.loads per event), as the SDKs of the
// code interpreter read it: the same language and JSON decoder as the
// direct client, so the comparison is of the paths, not of the clients.
const viaCorral = `
import json, sys, time, urllib.request
base, ctx, mb = sys.argv[1], sys.argv[2], int(sys.argv[3])
code = "import sys\nfor _ in range(%d): sys.stdout.write('x' * 1000000)\nsys.stdout.flush()" % mb
body = json.dumps({"code": code, "context": {"id": ctx, "language": "python"}}).encode()
req = urllib.request.Request(base + "/code", data=body, headers={"Content-Type": "application/json"})
got = 0
t0 = time.perf_counter()
with urllib.request.urlopen(req) as r:
    for line in r:
        if not line.startswith(b"data:"):
            continue
        ev = json.loads(line[5:])
        if ev["type"] == "stdout":
            got += len(ev["text"])
        elif ev["type"] == "error":
            sys.exit("code failed: %r" % ev)
        elif ev["type"] == "execution_complete":
            break
secs = time.perf_counter() - t0
print(json.dumps({"stream_bytes": got, "stream_s": secs}))
`

type directResult struct {
	RTT         []float64    `json:"rtt_ms"`
	First       [][2]float64 `json:"first_ms"`
	StreamBytes int64        `json:"stream_bytes"`
	StreamS     float64      `json:"stream_s"`
}

func run(bin string, n, starts, streamMB, streamRuns int) error {
	dir, err := os.MkdirTemp("", "corral-bench-code-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		if bin, err = corraltest.Build(dir); err != nil {
			return err
		}
	}

	// The direct client first, alone on the machine.
	var d directResult
	if err := runPython(dir, "jupyter_client", direct, &d, fmt.Sprint(n), fmt.Sprint(starts), "0"); err != nil {
		return err
	}

	ex, err := benchsrv.StartExecd(bin, filepath.Join(dir, "state"))
	if err != nil {
		return err
	}
	defer ex.Close()
	base := ex.URL
	hc := &http.Client{}

	// First result in a new context.
	var first, create []float64
	for range starts {
		t0 := time.Now()
		var c api.CodeContext
		if err := postJSON(hc, base+"/code/context", api.CodeContextRequest{Language: "python"}, &c); err != nil {
			return err
		}
		t1 := time.Now()
		if _, err := runCode(hc, base, c.ID, "1+1"); err != nil {
			return err
		}
		first = append(first, ms(time.Since(t0)))
		create = append(create, ms(t1.Sub(t0)))
		req, _ := http.NewRequest(http.MethodDelete, base+"/code/contexts/"+c.ID, nil)
		if res, err := hc.Do(req); err == nil {
			res.Body.Close()
		}
	}

	var c api.CodeContext
	if err := postJSON(hc, base+"/code/context", api.CodeContextRequest{Language: "python"}, &c); err != nil {
		return err
	}
	for range 20 {
		if _, err := runCode(hc, base, c.ID, "1+1"); err != nil {
			return err
		}
	}
	var rtt []float64
	for range n {
		t0 := time.Now()
		if _, err := runCode(hc, base, c.ID, "1+1"); err != nil {
			return err
		}
		rtt = append(rtt, ms(time.Since(t0)))
	}
	code := fmt.Sprintf("import sys\nfor _ in range(%d): sys.stdout.write('x' * 1000000)\nsys.stdout.flush()", streamMB)
	t0 := time.Now()
	got, err := runCode(hc, base, c.ID, code)
	if err != nil {
		return err
	}
	secs := time.Since(t0).Seconds()
	if got != int64(streamMB)*1_000_000 {
		return fmt.Errorf("streamed %d bytes, want %d", got, streamMB*1_000_000)
	}

	fmt.Printf("warm round trip of 1+1 (%d runs)\n", n)
	fmt.Printf("  jupyter_client direct  p50 %.2f ms  p99 %.2f ms\n", pct(d.RTT, 50), pct(d.RTT, 99))
	fmt.Printf("  corral HTTP /code      p50 %.2f ms  p99 %.2f ms  (%.2fx the direct client at p50)\n", pct(rtt, 50), pct(rtt, 99), pct(rtt, 50)/pct(d.RTT, 50))
	var dStart, dFirst []float64
	for _, f := range d.First {
		dStart, dFirst = append(dStart, f[0]), append(dFirst, f[1])
	}
	fmt.Printf("first result in a new context (%d starts, medians)\n", starts)
	fmt.Printf("  jupyter_client direct  start_new_kernel %.0f ms, first result %.0f ms\n", pct(dStart, 50), pct(dFirst, 50))
	fmt.Printf("  corral                 POST /code/context %.0f ms, first result %.0f ms (%.2fx)\n", pct(create, 50), pct(first, 50), pct(first, 50)/pct(dFirst, 50))
	// The two paths take turns, each with a kernel of its own (the direct
	// one starts a new one per stream): one stream of either moves by a
	// third between runs on this machine, the median of several less.
	var directRates, pyRates, ratios []float64
	for range streamRuns {
		var d, py directResult
		if err := runPython(dir, "jupyter_client stream", direct, &d, "0", "0", fmt.Sprint(streamMB)); err != nil {
			return err
		}
		if err := runPython(dir, "python client of corral", viaCorral, &py, base, c.ID, fmt.Sprint(streamMB)); err != nil {
			return err
		}
		for _, r := range []directResult{d, py} {
			if r.StreamBytes != int64(streamMB)*1_000_000 {
				return fmt.Errorf("stream: read %d bytes, want %d", r.StreamBytes, streamMB*1_000_000)
			}
		}
		dr, pr := float64(d.StreamBytes)/1e6/d.StreamS, float64(py.StreamBytes)/1e6/py.StreamS
		directRates, pyRates, ratios = append(directRates, dr), append(pyRates, pr), append(ratios, pr/dr)
	}
	directRate, pyRate := median(directRates), median(pyRates)
	fmt.Printf("printed output, %d MB (medians of %d streams each, taking turns)\n", streamMB, streamRuns)
	fmt.Printf("  jupyter_client direct            %.0f MB/s (%.0f to %.0f)\n", directRate, slices.Min(directRates), slices.Max(directRates))
	fmt.Printf("  corral HTTP /code, Python client %.0f MB/s (%.0f to %.0f): %.2fx the direct client (each turn's ratio %.2f to %.2f)\n",
		pyRate, slices.Min(pyRates), slices.Max(pyRates), pyRate/directRate, slices.Min(ratios), slices.Max(ratios))
	fmt.Printf("  corral HTTP /code, Go client     %.0f MB/s (one stream; encoding/json decodes each event)\n", float64(got)/1e6/secs)
	return nil
}

// runPython runs script with python3 (written into dir) and decodes the
// JSON line it prints into out; name says which script failed.
func runPython(dir, name, script string, out any, args ...string) error {
	// Not named after a module it imports: its directory comes first on
	// sys.path.
	path := filepath.Join(dir, "bench-"+strings.ReplaceAll(name, " ", "-")+".py")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		return err
	}
	b, err := exec.Command("/usr/bin/python3", append([]string{path}, args...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("%s: %v: %s", name, err, ee.Stderr)
		}
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s output: %v: %s", name, err, b)
	}
	return nil
}

// median is the middle of v (the mean of the two middle values of an
// even count).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pct(v []float64, p int) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, len(s)*p/100)]
}

func postJSON(hc *http.Client, url string, in, out any) error {
	b, _ := json.Marshal(in)
	res, err := hc.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %d %s", url, res.StatusCode, body)
	}
	return json.Unmarshal(body, out)
}

// runCode runs code and reads the whole stream; it returns the bytes of
// stdout.
func runCode(hc *http.Client, base, ctx, code string) (int64, error) {
	b, _ := json.Marshal(api.RunCodeRequest{Code: code, Context: &api.CodeContext{ID: ctx, Language: "python"}})
	res, err := hc.Post(base+"/code", "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		return 0, fmt.Errorf("POST /code: %d %s", res.StatusCode, body)
	}
	rd := sse.NewReader(res.Body)
	var n int64
	for {
		raw, err := rd.Next()
		if err != nil {
			return 0, fmt.Errorf("stream: %w", err)
		}
		var ev api.ServerStreamEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return 0, err
		}
		switch ev.Type {
		case api.EventStdout:
			n += int64(len(ev.Text))
		case api.EventError:
			return 0, fmt.Errorf("code failed: %+v", ev.Error)
		case api.EventExecutionComplete:
			return n, nil
		}
	}
}
