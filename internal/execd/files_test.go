// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd_test

import (
	"archive/tar"
	"github.com/corral-dev/corral/internal/tarfs"

	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral/api"
)

type part struct {
	name, filename, body string
}

// multipartBody builds an upload body; a part with a filename is a file part.
func multipartBody(t *testing.T, parts ...part) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		cd := fmt.Sprintf(`form-data; name=%q`, p.name)
		if p.filename != "" {
			cd += fmt.Sprintf(`; filename=%q`, p.filename)
		}
		h.Set("Content-Disposition", cd)
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(w, p.body)
	}
	_ = mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}

func (d *daemon) upload(ctype string, body []byte) answer {
	d.t.Helper()
	return d.do("POST", "/files/upload", body, "Content-Type", ctype)
}

func q(path string) string { return url.QueryEscape(path) }

func TestUploadDownloadInfo(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "sub", "a.txt")
	// Metadata as a file part (the Go SDK), with the content after it.
	ctype, body := multipartBody(t, part{"metadata", "metadata", fmt.Sprintf(`{"path":%q,"mode":640}`, target)}, part{"file", "a.txt", "hello world"})
	if a := d.upload(ctype, body); a.status != 200 {
		t.Fatalf("upload = %d %s", a.status, a.body)
	}
	if b, _ := os.ReadFile(target); string(b) != "hello world" {
		t.Fatalf("uploaded content = %q", b)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, want 0640", fi.Mode().Perm())
	}
	// Metadata as a value part (the Python SDK), two files, and a file part
	// that comes before its metadata.
	b2, b3 := filepath.Join(dir, "b.bin"), filepath.Join(dir, "c.txt")
	ctype, body = multipartBody(t,
		part{"metadata", "", fmt.Sprintf(`{"path":%q}`, b2)}, part{"file", "b", "BBB"},
		part{"file", "c", "CCC"}, part{"metadata", "", fmt.Sprintf(`{"path":%q}`, b3)})
	if a := d.upload(ctype, body); a.status != 200 {
		t.Fatalf("upload of two files = %d %s", a.status, a.body)
	}
	for p, want := range map[string]string{b2: "BBB", b3: "CCC"} {
		if b, _ := os.ReadFile(p); string(b) != want {
			t.Errorf("%s = %q, want %q", p, b, want)
		}
	}

	var info map[string]api.FileInfo
	d.do("GET", "/files/info?path="+q(target)+"&path="+q(dir), nil).json(t, &info)
	fi := info[target]
	if fi.Type != api.FileTypeFile || fi.Size != 11 || fi.Mode != 640 || fi.Owner == "" || fi.Group == "" || fi.ModifiedAt.IsZero() {
		t.Errorf("info = %+v", fi)
	}
	if info[dir].Type != api.FileTypeDirectory {
		t.Errorf("dir info = %+v", info[dir])
	}
	if a := d.do("GET", "/files/info?path="+q(target)+"&path=/no/such", nil); a.status != 404 || a.code(t) != api.CodeExecdFileNotFound {
		t.Errorf("info with a missing path = %d %s", a.status, a.body)
	}

	a := d.do("GET", "/files/download?path="+q(target), nil)
	if a.status != 200 || string(a.body) != "hello world" || a.header.Get("Content-Length") != "11" ||
		!strings.Contains(a.header.Get("Content-Disposition"), `filename="a.txt"`) {
		t.Errorf("download = %d %q %v", a.status, a.body, a.header)
	}
	a = d.do("GET", "/files/download?path="+q(target), nil, "Range", "bytes=6-")
	if a.status != 206 || string(a.body) != "world" || a.header.Get("Content-Range") != "bytes 6-10/11" {
		t.Errorf("range download = %d %q %v", a.status, a.body, a.header)
	}
	a = d.do("GET", "/files/download?path="+q(target), nil, "Range", "bytes=-3")
	if a.status != 206 || string(a.body) != "rld" {
		t.Errorf("suffix range = %d %q", a.status, a.body)
	}
	for _, bad := range []string{"bytes=20-", "bytes=5-2", "items=0-1", "bytes=0-1,3-4"} {
		if a := d.do("GET", "/files/download?path="+q(target), nil, "Range", bad); a.status != 416 {
			t.Errorf("range %q = %d", bad, a.status)
		}
	}
	if a := d.do("GET", "/files/download?path=/no/such", nil); a.status != 404 {
		t.Errorf("download missing = %d", a.status)
	}
	if a := d.do("GET", "/files/download?path="+q(dir), nil); a.status != 400 {
		t.Errorf("download a directory = %d", a.status)
	}
	if a := d.do("GET", "/files/download", nil); a.status != 400 {
		t.Errorf("download without path = %d", a.status)
	}
}

func TestUploadIsAtomicAndChecked(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "keep.txt")
	_ = os.WriteFile(target, []byte("original"), 0o644)
	// A body cut in the middle of the file part: nothing may change.
	ctype, body := multipartBody(t, part{"metadata", "m", fmt.Sprintf(`{"path":%q}`, target)}, part{"file", "f", strings.Repeat("x", 100000)})
	cut := body[:len(body)/2]
	if a := d.upload(ctype, cut); a.status != 400 {
		t.Errorf("truncated upload = %d %s", a.status, a.body)
	}
	if b, _ := os.ReadFile(target); string(b) != "original" {
		t.Errorf("a broken upload changed the target to %d bytes", len(b))
	}
	// Cut between a file's metadata part and its file part, and in the
	// headers of the file part: mime/multipart read either as a body of
	// no more parts.
	meta := []byte(fmt.Sprintf(`{"path":%q}`, target))
	i := bytes.Index(body, meta) + len(meta)
	at := bytes.Index(body[i:], []byte("Content-Disposition"))
	if at < 0 {
		t.Fatalf("no second part in %q", body)
	}
	for _, at := range []int{at, at + 10} {
		if a := d.upload(ctype, body[:i+at]); a.status != 400 || !bytes.Contains(a.body, []byte("ended")) {
			t.Errorf("upload cut at %q = %d %s", body[i:i+at], a.status, a.body)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("a broken upload left files behind: %v", entries)
	}
	for name, tc := range map[string]struct {
		ctype string
		body  []byte
	}{
		"not multipart":     {"application/json", []byte("{}")},
		"no parts":          mp(t),
		"metadata only":     mp(t, part{"metadata", "", `{"path":"/tmp/x"}`}),
		"file only":         mp(t, part{"file", "f", "x"}),
		"metadata not json": mp(t, part{"metadata", "", `nope`}, part{"file", "f", "x"}),
		"metadata no path":  mp(t, part{"metadata", "", `{}`}, part{"file", "f", "x"}),
		"target is a dir":   mp(t, part{"metadata", "", fmt.Sprintf(`{"path":%q}`, dir)}, part{"file", "f", "x"}),
		"bad mode":          mp(t, part{"metadata", "", fmt.Sprintf(`{"path":%q,"mode":999}`, filepath.Join(dir, "m"))}, part{"file", "f", "x"}),
	} {
		if a := d.upload(tc.ctype, tc.body); a.status != 400 {
			t.Errorf("%s: %d %s", name, a.status, a.body)
		}
	}
}

func mp(t *testing.T, parts ...part) struct {
	ctype string
	body  []byte
} {
	c, b := multipartBody(t, parts...)
	return struct {
		ctype string
		body  []byte
	}{c, b}
}

func TestLargeUploadAndDownloadRoundTrip(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	target := filepath.Join(t.TempDir(), "big.bin")
	data := make([]byte, 32<<20)
	_, _ = rand.Read(data)
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		w, _ := mw.CreateFormFile("metadata", "metadata")
		fmt.Fprintf(w, `{"path":%q}`, target)
		w, _ = mw.CreateFormFile("file", "big.bin")
		_, _ = w.Write(data)
		_ = mw.Close()
		_ = pw.Close()
	}()
	res, err := http.DefaultClient.Do(d.request("POST", "/files/upload", pr, "Content-Type", mw.FormDataContentType()))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("upload = %d", res.StatusCode)
	}
	a := d.do("GET", "/files/download?path="+q(target), nil)
	if !bytes.Equal(a.body, data) {
		t.Fatalf("downloaded %d bytes that differ from the %d uploaded", len(a.body), len(data))
	}
}

func TestFileOperations(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	dir := t.TempDir()
	must := func(p, content string) {
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must(filepath.Join(dir, "src", "main.go"), "package main // localhost:8080 localhost")
	must(filepath.Join(dir, "src", "util", "util_test.go"), "package util")
	must(filepath.Join(dir, "README.md"), "# hi")
	_ = os.Symlink("/etc", filepath.Join(dir, "link"))

	var found []api.FileInfo
	d.do("GET", "/files/search?path="+q(dir)+"&pattern="+q("*.go"), nil).json(t, &found)
	if len(found) != 2 {
		t.Errorf("search *.go = %d results", len(found))
	}
	d.do("GET", "/files/search?path="+q(dir)+"&pattern="+q("src/**/*_test.go"), nil).json(t, &found)
	if len(found) != 1 || !strings.HasSuffix(found[0].Path, "util_test.go") {
		t.Errorf("search src/**/*_test.go = %+v", found)
	}
	d.do("GET", "/files/search?path="+q(dir), nil).json(t, &found)
	if len(found) != 3 {
		t.Errorf("search ** = %d files (directories and links not reported, not followed)", len(found))
	}
	if a := d.do("GET", "/files/search?path=/no/such", nil); a.status != 404 {
		t.Errorf("search missing dir = %d", a.status)
	}

	var list []api.FileInfo
	d.do("GET", "/directories/list?path="+q(dir), nil).json(t, &list)
	var names []string
	for _, fi := range list {
		names = append(names, strings.TrimPrefix(fi.Path, dir+"/")+":"+fi.Type)
	}
	if strings.Join(names, ",") != "README.md:file,link:symlink,src:directory" {
		t.Errorf("list depth 1 = %v", names)
	}
	d.do("GET", "/directories/list?path="+q(dir)+"&depth=3", nil).json(t, &list)
	names = nil
	for _, fi := range list {
		names = append(names, strings.TrimPrefix(fi.Path, dir+"/"))
	}
	if strings.Join(names, ",") != "README.md,link,src,src/main.go,src/util,src/util/util_test.go" {
		t.Errorf("list depth 3 = %v", names)
	}
	if a := d.do("GET", "/directories/list?path="+q(dir)+"&depth=0", nil); string(a.body) != "[]\n" {
		t.Errorf("depth 0 = %s", a.body)
	}
	for _, bad := range []string{"?path=/no/such", "?path=" + q(filepath.Join(dir, "README.md")), "?path=" + q(dir) + "&depth=-1", ""} {
		if a := d.do("GET", "/directories/list"+bad, nil); a.status != 400 && a.status != 404 {
			t.Errorf("list %s = %d", bad, a.status)
		}
	}

	main := filepath.Join(dir, "src", "main.go")
	var rep map[string]api.ReplaceFileContentResult
	d.do("POST", "/files/replace?verbose=true", map[string]any{main: map[string]string{"old": "localhost", "new": "0.0.0.0"}}).json(t, &rep)
	if rep[main].ReplacedCount != 2 {
		t.Errorf("replace = %+v", rep)
	}
	if b, _ := os.ReadFile(main); string(b) != "package main // 0.0.0.0:8080 0.0.0.0" {
		t.Errorf("after replace = %q", b)
	}
	if a := d.do("POST", "/files/replace", map[string]any{main: map[string]string{"old": "", "new": "x"}}); a.status != 400 {
		t.Errorf("replace with empty old = %d", a.status)
	}

	if a := d.do("POST", "/files/permissions", map[string]any{main: map[string]any{"mode": 600}}); a.status != 200 {
		t.Fatalf("chmod = %d %s", a.status, a.body)
	}
	if fi, _ := os.Stat(main); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after chmod = %v", fi.Mode().Perm())
	}
	if a := d.do("POST", "/files/permissions", map[string]any{main: map[string]any{"mode": 800}}); a.status != 400 {
		t.Errorf("mode 800 = %d", a.status)
	}
	if a := d.do("POST", "/files/permissions", map[string]any{main: map[string]any{"mode": 644, "owner": "no-such-user-x"}}); a.status != 400 {
		t.Errorf("unknown owner = %d", a.status)
	}

	moved := filepath.Join(dir, "archive", "2026", "main.go")
	if a := d.do("POST", "/files/mv", []map[string]string{{"src": main, "dest": moved}}); a.status != 200 {
		t.Fatalf("mv = %d %s", a.status, a.body)
	}
	if _, err := os.Stat(moved); err != nil {
		t.Errorf("mv: %v", err)
	}
	if a := d.do("POST", "/files/mv", []map[string]string{{"src": main, "dest": moved}}); a.status != 404 {
		t.Errorf("mv of a missing src = %d", a.status)
	}
	if a := d.do("POST", "/files/mv", []map[string]string{{"src": moved, "dest": filepath.Join(dir, "README.md")}}); a.status != 400 {
		t.Errorf("mv onto an existing file = %d", a.status)
	}

	newDir := filepath.Join(dir, "a", "b", "c")
	if a := d.do("POST", "/directories", map[string]any{newDir: map[string]any{"mode": 700}}); a.status != 200 {
		t.Fatalf("mkdir -p = %d %s", a.status, a.body)
	}
	if fi, err := os.Stat(newDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("mkdir: %v %v", fi, err)
	}
	if a := d.do("DELETE", "/files?path="+q(filepath.Join(dir, "README.md"))+"&path=/no/such/file", nil); a.status != 200 {
		t.Errorf("rm = %d %s", a.status, a.body)
	}
	if a := d.do("DELETE", "/files?path="+q(newDir), nil); a.status != 400 {
		t.Errorf("rm of a directory through /files = %d", a.status)
	}
	if a := d.do("DELETE", "/directories?path="+q(filepath.Join(dir, "a"))+"&path=/no/such", nil); a.status != 200 {
		t.Errorf("rm -rf = %d %s", a.status, a.body)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); err == nil {
		t.Errorf("rm -rf left the directory")
	}
	if a := d.do("DELETE", "/directories?path=/", nil); a.status != 400 {
		t.Errorf("rm -rf / = %d", a.status)
	}
	// ~ is the home directory.
	home, _ := os.UserHomeDir()
	var hi map[string]api.FileInfo
	d.do("GET", "/files/info?path=~", nil).json(t, &hi)
	if hi["~"].Path != home {
		t.Errorf("~ resolved to %q, want %q", hi["~"].Path, home)
	}
}

func TestMetricsRoutes(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	var m api.Metrics
	d.do("GET", "/metrics", nil).json(t, &m)
	if m.CPUCount <= 0 || m.MemTotalMiB <= 0 || m.Timestamp == 0 {
		t.Errorf("metrics = %+v", m)
	}
	res, err := http.DefaultClient.Do(d.request("GET", "/metrics/watch", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	buf := make([]byte, 4096)
	var got string
	for strings.Count(got, "\n\n") < 2 {
		n, err := res.Body.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got += string(buf[:n])
	}
	if !strings.Contains(got, `"type":"metrics"`) || !strings.HasPrefix(got, "data: {") {
		t.Errorf("watch stream = %q", got)
	}
}

func TestDirectoryArchives(t *testing.T) {
	t.Parallel()
	d := startExecd(t)
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "a/empty"), 0o700))
	must(os.WriteFile(filepath.Join(src, "a/run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Symlink("run.sh", filepath.Join(src, "a/link")))
	var tarball bytes.Buffer
	if _, err := tarfs.Write(&tarball, src); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "new")
	a := d.do("PUT", "/directories/archive?path="+q(dst), tarball.Bytes(), "Content-Type", "application/x-tar")
	var st map[string]int
	if a.status != 200 {
		t.Fatalf("upload archive = %d %s", a.status, a.body)
	}
	a.json(t, &st)
	if st["files"] != 1 || st["dirs"] != 2 || st["links"] != 1 {
		t.Errorf("stats = %v", st)
	}
	if fi, err := os.Stat(filepath.Join(dst, "a/run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("unpacked run.sh: %v %v", fi, err)
	}
	if l, _ := os.Readlink(filepath.Join(dst, "a/link")); l != "run.sh" {
		t.Errorf("unpacked link -> %q", l)
	}
	a = d.do("GET", "/directories/archive?path="+q(dst), nil)
	if a.status != 200 || a.header.Get("Content-Type") != "application/x-tar" {
		t.Fatalf("download archive = %d %s", a.status, a.body)
	}
	back := filepath.Join(t.TempDir(), "back")
	if _, err := tarfs.Extract(bytes.NewReader(a.body), back, tarfs.ExtractOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(back, "a/run.sh")); string(b) != "#!/bin/sh\n" {
		t.Errorf("round trip lost run.sh: %q", b)
	}

	// Hostile and mistaken requests are clean errors.
	var evil bytes.Buffer
	tw := tar.NewWriter(&evil)
	_ = tw.WriteHeader(&tar.Header{Name: "../../escaped", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	outside := t.TempDir()
	if a := d.do("PUT", "/directories/archive?path="+q(filepath.Join(outside, "in/side")), evil.Bytes()); a.status != 400 {
		t.Errorf("escaping archive = %d %s", a.status, a.body)
	}
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Error("the archive escaped its directory")
	}
	if a := d.do("PUT", "/directories/archive?path="+q(dst), "not a tar file at all, just text that goes on and on"); a.status != 400 {
		t.Errorf("garbage archive = %d %s", a.status, a.body)
	}
	if a := d.do("GET", "/directories/archive?path=/no/such/dir", nil); a.status != 404 {
		t.Errorf("missing dir = %d", a.status)
	}
	if a := d.do("GET", "/directories/archive?path="+q(filepath.Join(dst, "a/run.sh")), nil); a.status != 400 {
		t.Errorf("archive of a file = %d", a.status)
	}
	if a := d.do("GET", "/directories/archive", nil); a.status != 400 {
		t.Errorf("no path = %d", a.status)
	}
}
