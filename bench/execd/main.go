// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command execd measures a real `corral execd` process from a client on
// the same machine: command round trip next to a plain fork/exec of the
// same shell command, stdout streaming throughput next to the same
// pipeline into /dev/null, upload and download throughput, and idle memory
// (RSS, the pages touched while idle, and the share with ten execds).
//
//	go run ./bench/execd [-n 300] [-stream-bytes 1073741824] [-file-bytes 268435456]
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral-dev/corral/bench/internal/benchsrv"
	"github.com/corral-dev/corral/sse"

	"github.com/corral-dev/corral/internal/testutil/corraltest"
)

func main() {
	n := flag.Int("n", 300, "round trips to measure")
	streamBytes := flag.Int64("stream-bytes", 1<<30, "bytes of stdout to stream")
	fileBytes := flag.Int64("file-bytes", 256<<20, "bytes to upload and download")
	bin := flag.String("binary", "", "corral binary (default: build it)")
	tiers := flag.String("tiers", "", "also measure execd inside a native sandbox of each of these isolation tiers (runc,runsc; as root)")
	runscs := flag.String("runsc", "", "with -tiers runsc: the runsc binaries to measure the tier with, comma-separated, a row each (--oci-runsc; default runsc on PATH), such as runsc,/usr/bin/runsc")
	flag.Parse()
	tierList, runscList = *tiers, *runscs
	if err := run(*bin, *n, *streamBytes, *fileBytes); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// tierList is -tiers, runscList -runsc.
var tierList, runscList string

func run(bin string, n int, streamBytes, fileBytes int64) error {
	dir, err := os.MkdirTemp("", "corral-bench-execd-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		if bin, err = corraltest.Build(dir); err != nil {
			return err
		}
	}
	ex, err := benchsrv.StartExecd(bin, filepath.Join(dir, "state"))
	if err != nil {
		return err
	}
	defer ex.Close()
	cmd, base := ex.Cmd, ex.URL
	time.Sleep(500 * time.Millisecond)
	idle := procValues(cmd.Process.Pid, "status")
	mem, err := idleMemory(bin, dir, cmd.Process.Pid)
	if err != nil {
		return err
	}

	hc := &http.Client{}
	shell := "/bin/sh"
	if p, err := exec.LookPath("bash"); err == nil {
		shell = p
	}
	fmt.Printf("corral execd on this machine; %d samples per latency row\n\n", n)
	fmt.Println("| measurement | p50 | p99 | note |")
	fmt.Println("|---|---:|---:|---|")
	var forkLat, idleForkLat, rtLat []time.Duration
	for range n {
		t := time.Now()
		if err := exec.Command(shell, "-c", "true").Run(); err != nil {
			return err
		}
		forkLat = append(forkLat, time.Since(t))
	}
	// The same after a pause: a request's steps leave the CPUs idle for
	// moments, and on a virtual machine a CPU idle past its halt-polling
	// window starts the next process slower.
	for range n {
		time.Sleep(3 * time.Millisecond)
		t := time.Now()
		if err := exec.Command(shell, "-c", "true").Run(); err != nil {
			return err
		}
		idleForkLat = append(idleForkLat, time.Since(t))
	}
	for range n {
		t := time.Now()
		if err := runCommand(hc, base, "true", nil); err != nil {
			return err
		}
		rtLat = append(rtLat, time.Since(t))
	}
	row("fork/exec `"+filepath.Base(shell)+" -c true` (baseline)", forkLat, "os/exec from the client process, back to back")
	row("fork/exec `"+filepath.Base(shell)+" -c true`, each after 3 ms idle", idleForkLat, "the same, the CPUs idle before each")
	row("`POST /command {\"command\":\"true\"}` to stream end", rtLat, fmt.Sprintf("HTTP + SSE + the same fork/exec: %.2fx the baseline",
		float64(pct(rtLat, 0.5))/float64(pct(forkLat, 0.5))))

	line := strings.Repeat("x", 1023)
	gen := fmt.Sprintf("yes %s | head -c %d", line, streamBytes)
	t := time.Now()
	genCmd := exec.Command(shell, "-c", gen+" > /dev/null")
	if err := genCmd.Run(); err != nil {
		return err
	}
	raw := time.Since(t)
	// The CPU each side spends, to tell what the machine's cores allow:
	// the generator's (the shell's rusage includes its pipeline's),
	// execd's own, what execd's children used (the same generator, run
	// by execd) and this client's.
	genCPU := genCmd.ProcessState.UserTime() + genCmd.ProcessState.SystemTime()
	own0, kids0 := procCPU(cmd.Process.Pid)
	self0 := selfCPU()
	t = time.Now()
	wire, err := streamRaw(hc, base, gen)
	if err != nil {
		return err
	}
	streamed := time.Since(t)
	own1, kids1 := procCPU(cmd.Process.Pid)
	execdCPU, kidsCPU, clientCPU := own1-own0, kids1-kids0, selfCPU()-self0
	if wire < streamBytes {
		return fmt.Errorf("the stream carried %d bytes for %d bytes of output", wire, streamBytes)
	}
	fmt.Println()
	fmt.Println("| throughput | MB/s | note |")
	fmt.Println("|---|---:|---|")
	fmt.Printf("| stdout streaming, %d MiB in 1 KiB lines | %.0f | the generator alone into /dev/null: %.0f MB/s |\n",
		streamBytes>>20, float64(streamBytes)/streamed.Seconds()/1e6, float64(streamBytes)/raw.Seconds()/1e6)
	gib := float64(streamBytes) / (1 << 30)
	perGiB := func(d time.Duration) float64 { return d.Seconds() / gib }
	rate := 0.8 * float64(streamBytes) / raw.Seconds() / (1 << 30) // GiB/s
	fmt.Printf("\nCPU per GiB streamed: the generator alone %.2f s (%.1f CPUs at its rate); through execd, the generator %.2f s, execd %.2f s, this client %.2f s — "+
		"0.8x the generator's rate would need %.1f CPUs of this machine's %d (the generator %.1f of them)\n\n",
		perGiB(genCPU), perGiB(genCPU)/raw.Seconds()*gib, perGiB(kidsCPU), perGiB(execdCPU), perGiB(clientCPU),
		rate*(perGiB(kidsCPU)+perGiB(execdCPU)+perGiB(clientCPU)), runtime.NumCPU(), rate*perGiB(kidsCPU))

	target := filepath.Join(dir, "upload.bin")
	// Five of each, taking turns (one of each moves by a third from run
	// to run here, with the disk's writeback); the medians.
	var ups, locals []time.Duration
	for range 5 {
		up, err := upload(hc, base, target, fileBytes)
		if err != nil {
			return err
		}
		local, err := localCopy(filepath.Join(dir, "local.bin"), fileBytes)
		if err != nil {
			return err
		}
		ups, locals = append(ups, up), append(locals, local)
	}
	up, local := pct(ups, 0.5), pct(locals, 0.5)
	fmt.Printf("| upload %d MiB (multipart, fsynced; median of 5) | %.0f | a plain local copy of the same bytes into the same directory (1 MiB writes, fsync), taking turns with it: %.0f MB/s; upload %.2fx |\n",
		fileBytes>>20, float64(fileBytes)/up.Seconds()/1e6, float64(fileBytes)/local.Seconds()/1e6, local.Seconds()/up.Seconds())
	t = time.Now()
	res, err := hc.Get(base + "/files/download?path=" + target)
	if err != nil {
		return err
	}
	nb, err := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err != nil || nb != fileBytes {
		return fmt.Errorf("download: %d bytes, %v", nb, err)
	}
	fmt.Printf("| download %d MiB | %.0f | |\n", fileBytes>>20, float64(fileBytes)/time.Since(t).Seconds()/1e6)
	fmt.Printf("\nidle execd, 500 ms after start: RSS %.1f MiB = %.1f MiB of its own (anonymous) + %.1f MiB of pages of the corral binary\n",
		mib(idle["VmRSS"]), mib(idle["RssAnon"]), mib(idle["RssFile"]))
	fmt.Print(mem)
	if tierList != "" {
		runscs := []string{""}
		if runscList != "" {
			runscs = strings.Split(runscList, ",")
		}
		res, err := measureTiers(strings.Split(tierList, ","), runscs, n, streamBytes)
		if err != nil {
			return fmt.Errorf("tiers: %w", err)
		}
		fmt.Println()
		fmt.Println("| execd in a sandbox of tier | round trip p50 | p99 | p50 vs execd on the host | stdout streaming MB/s |")
		fmt.Println("|---|---:|---:|---:|---:|")
		fmt.Printf("| (execd on the host, above) | %s | %s | 1.00× | %.0f |\n", pct(rtLat, .5), pct(rtLat, .99), float64(streamBytes)/streamed.Seconds()/1e6)
		for _, r := range res {
			fmt.Printf("| %s | %s | %s | %.2f× | %.0f |\n", r.tier, pct(r.rt, .5), pct(r.rt, .99), float64(pct(r.rt, .5))/float64(pct(rtLat, .5)), r.stream)
		}
	}
	return nil
}

// idleMemory measures what an idle execd really holds: the pages it
// touches while idle, and its proportional share of the binary's pages
// when several sandboxes run it (as they all run the same file).
func idleMemory(bin, dir string, pid int) (string, error) {
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("1"), 0); err != nil {
		return "", err
	}
	time.Sleep(5 * time.Second)
	ref := procValues(pid, "smaps_rollup")["Referenced"]
	const many = 10
	var pss int64
	for i := range many {
		c := exec.Command(bin, "execd", "--listen", "127.0.0.1:0", "--state-dir", filepath.Join(dir, "state"+strconv.Itoa(i)))
		if err := c.Start(); err != nil {
			return "", err
		}
		defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
	}
	time.Sleep(time.Second)
	pss = procValues(pid, "smaps_rollup")["Pss"]
	return fmt.Sprintf("pages it touched in 5 s of idleness: %.1f MiB\nits proportional set size with %d more execds running (shared pages split among the processes that map them): %.1f MiB\n",
		mib(ref), many, mib(pss)), nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// procValues reads the "Name: N kB" lines of /proc/PID/file, in bytes.
func procValues(pid int, file string) map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + file)
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(l, ":")
		if !ok || !strings.HasSuffix(strings.TrimSpace(v), "kB") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err == nil {
			out[name] = kb << 10
		}
	}
	return out
}

// procCPU is pid's CPU time and its waited-for children's.
func procCPU(pid int) (own, children time.Duration) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	// Fields after the command name, which is in parentheses: utime,
	// stime, cutime and cstime are the 12th to the 15th of them.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 15 {
		return 0, 0
	}
	tick := func(s string) time.Duration {
		v, _ := strconv.ParseInt(s, 10, 64)
		return time.Duration(v) * time.Second / 100
	}
	return tick(f[11]) + tick(f[12]), tick(f[13]) + tick(f[14])
}

// selfCPU is this process's CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// streamRaw runs a command and reads its stream as bytes, checking only
// that it ends with execution_complete: the client must not cost more CPU
// than the server it measures.
func streamRaw(hc *http.Client, base, command string) (int64, error) {
	body, _ := json.Marshal(map[string]string{"command": command})
	res, err := hc.Post(base+"/command", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	buf := make([]byte, 1<<20)
	var n int64
	var tail []byte
	for {
		k, err := res.Body.Read(buf)
		n += int64(k)
		if k > 0 {
			tail = append(tail[:0], buf[max(0, k-300):k]...)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, err
		}
	}
	if !bytes.Contains(tail, []byte(`"type":"execution_complete"`)) {
		return n, fmt.Errorf("the stream did not end with execution_complete: %q", tail)
	}
	return n, nil
}

// runCommand runs a foreground command and reads its stream to the end;
// stdout counts the bytes of stdout text (plus one per line).
func runCommand(hc *http.Client, base, command string, stdout *int64) error {
	body, _ := json.Marshal(map[string]string{"command": command})
	res, err := hc.Post(base+"/command", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	rd := sse.NewReader(res.Body)
	for {
		raw, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var ev struct{ Type, Text string }
		if err := json.Unmarshal(raw, &ev); err != nil {
			return err
		}
		switch ev.Type {
		case "stdout":
			if stdout != nil {
				*stdout += int64(len(ev.Text)) + 1
			}
		case "error":
			return fmt.Errorf("command failed: %s", raw)
		}
	}
}

// upload sends size bytes as a multipart file upload with its length
// known, as SDKs send a file: the body is read straight from the pattern
// (no pipe between a writer and the transport), so this client costs
// little of the CPU the server shares with it.
func upload(hc *http.Client, base, target string, size int64) (time.Duration, error) {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	w, _ := mw.CreateFormFile("metadata", "metadata")
	fmt.Fprintf(w, `{"path":%q}`, target)
	_, _ = mw.CreateFormFile("file", "upload.bin")
	tail := "\r\n--" + mw.Boundary() + "--\r\n"
	body := io.MultiReader(&head, &patternReader{left: size}, strings.NewReader(tail))
	req, err := http.NewRequest(http.MethodPost, base+"/files/upload", body)
	if err != nil {
		return 0, err
	}
	req.ContentLength = int64(head.Len()) + size + int64(len(tail))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	t := time.Now()
	res, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		return 0, fmt.Errorf("upload: %d", res.StatusCode)
	}
	return time.Since(t), nil
}

// patternReader reads left bytes of a repeating pattern.
type patternReader struct {
	left int64
	off  int
}

// patternBlock is the pattern, repeated to 64 KiB.
var patternBlock = bytes.Repeat([]byte("0123456789abcdef"), 4096)

func (p *patternReader) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.left)]
	n := 0
	for n < len(b) {
		k := copy(b[n:], patternBlock[p.off:])
		n += k
		p.off = (p.off + k) % len(patternBlock)
	}
	p.left -= int64(n)
	return n, nil
}

// localCopy is upload's baseline: the same bytes written to a file
// beside its target in 1 MiB writes and synced, as `dd bs=1M
// conv=fsync` would.
func localCopy(path string, size int64) (time.Duration, error) {
	chunk := bytes.Repeat(patternBlock, 16)
	t := time.Now()
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	for left := size; left > 0; left -= int64(len(chunk)) {
		if _, err := f.Write(chunk[:min(int64(len(chunk)), left)]); err != nil {
			f.Close()
			return 0, err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	return time.Since(t), nil
}

func row(name string, lat []time.Duration, note string) {
	fmt.Printf("| %s | %s | %s | %s |\n", name, pct(lat, 0.5), pct(lat, 0.99), note)
}

// pct is the q quantile of lat, rounded to 10 µs.
func pct(lat []time.Duration, q float64) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*q))].Round(10 * time.Microsecond)
}
