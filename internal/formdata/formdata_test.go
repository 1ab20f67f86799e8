// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package formdata

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/textproto"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// part is what a reader made of one part.
type part struct {
	Header  textproto.MIMEHeader
	Name    string
	Content string
}

// readAll reads every part with reads of size n; err is the first
// error, with the parts read before it.
func readAll(body []byte, boundary string, n int, ours bool) (parts []part, err error) {
	type partReader interface {
		io.Reader
		FormName() string
	}
	var next func() (partReader, textproto.MIMEHeader, error)
	src := io.Reader(bytes.NewReader(body))
	if n == 1 {
		src = iotest.OneByteReader(src)
	}
	if ours {
		r, err := NewReader(src, boundary)
		if err != nil {
			return nil, err
		}
		next = func() (partReader, textproto.MIMEHeader, error) {
			p, err := r.NextPart()
			if err != nil {
				return nil, nil, err
			}
			return p, p.Header, nil
		}
	} else {
		r := multipart.NewReader(src, boundary)
		next = func() (partReader, textproto.MIMEHeader, error) {
			p, err := r.NextPart()
			if err != nil {
				return nil, nil, err
			}
			return p, p.Header, nil
		}
	}
	for {
		p, h, err := next()
		if errors.Is(err, io.EOF) {
			return parts, nil
		}
		if err != nil {
			return parts, err
		}
		var b strings.Builder
		buf := make([]byte, n)
		for {
			k, err := p.Read(buf)
			b.Write(buf[:k])
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return parts, err
			}
		}
		parts = append(parts, part{Header: h, Name: p.FormName(), Content: b.String()})
	}
}

// body builds a multipart body of the given contents with w's boundary.
func body(t testing.TB, boundary string, contents ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	if boundary != "" {
		if err := w.SetBoundary(boundary); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range contents {
		f, err := w.CreateFormFile(fmt.Sprintf("f%d", i), "x.bin")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.Write([]byte(c))
	}
	_ = w.Close()
	return buf.Bytes()
}

// TestMatchesMimeMultipart: on well-formed bodies, and on the edges of
// the framing, the parts read are mime/multipart's, whatever the size of
// the reads and of the input's arrivals.
func TestMatchesMimeMultipart(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 3*readBuffer+17)
	for i := range big {
		big[i] = byte(rng.IntN(256))
	}
	const b = "0123456789abcdef"
	long := strings.Repeat("b", maxBoundary)
	cases := map[string]struct {
		boundary string
		body     []byte
	}{
		"one small part":       {b, body(t, b, "hello")},
		"empty parts":          {b, body(t, b, "", "", "x")},
		"large random part":    {b, body(t, b, string(big), "after")},
		"longest boundary":     {long, body(t, long, string(big[:readBuffer+5]), "x")},
		"go's own boundary":    {"", nil},
		"near delimiters":      {b, body(t, b, "\r\n--"+b+"x", "\r\n--"+b[:5], "--"+b+"x", "\r\n-", "\r")},
		"delimiter at the end": {b, body(t, b, "ends with \r\n--"+b[:len(b)-1])},
		"bare line feeds": {b, []byte("preamble\n--" + b + "\nContent-Disposition: form-data; name=\"a\"\n\nA\n--" + b +
			"\nContent-Disposition: form-data; name=\"b\"\n\nB\n--" + b + "--\n")},
		"padding after delimiters":                     {b, []byte("--" + b + " \t\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nA\r\n--" + b + "\t\r\n\r\nB\r\n--" + b + "--epilogue")},
		"no line end before an empty part's delimiter": {b, []byte("--" + b + "\r\nX: y\r\n\r\n--" + b + "\r\n\r\nB\r\n--" + b + "--")},
		"quoted-printable":                             {b, []byte("--" + b + "\r\nContent-Transfer-Encoding: quoted-printable\r\nContent-Disposition: form-data; name=\"q\"\r\n\r\nA=3DB caf=C3=A9=\r\n!\r\n--" + b + "--\r\n")},
		"no parts":                                     {b, []byte("--" + b + "--\r\n")},
		"long preamble":                                {b, append(bytes.Repeat([]byte("p"), 2*readBuffer), "\r\n"+string(body(t, b, "x"))...)},
	}
	g := cases["go's own boundary"]
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	f, _ := w.CreateFormFile("file", "f")
	_, _ = f.Write(big)
	_ = w.Close()
	g.boundary, g.body = w.Boundary(), buf.Bytes()
	cases["go's own boundary"] = g
	for name, c := range cases {
		like := c.body
		if name == "long preamble" {
			like = body(t, b, "x") // mime/multipart refuses a line longer than 4 KiB there
		}
		want, err := readAll(like, c.boundary, 32<<10, false)
		if err != nil {
			t.Fatalf("%s: mime/multipart: %v", name, err)
		}
		for _, n := range []int{1, 7, 4096, readBuffer, 1 << 20} {
			got, err := readAll(c.body, c.boundary, n, true)
			if err != nil {
				t.Errorf("%s, reads of %d: %v", name, n, err)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s, reads of %d: %d parts differ from mime/multipart's %d\n got %.300q\nwant %.300q", name, n, len(got), len(want), got, want)
			}
		}
	}
}

// TestRefusesMalformed: a body a client got wrong, or made to hurt, ends
// in an error that says so, never a hang or a part read past its end.
func TestRefusesMalformed(t *testing.T) {
	const b = "0123456789abcdef"
	whole := body(t, b, "content of the part")
	cases := map[string][]byte{
		"no boundary line":                      []byte("just some bytes\r\n"),
		"empty body":                            nil,
		"ends inside a part":                    whole[:len(whole)-len(b)-8],
		"ends inside headers":                   []byte("--" + b + "\r\nContent-Disposition: form-da"),
		"headers too long":                      []byte("--" + b + "\r\nX: " + strings.Repeat("v", maxHeaderBytes) + "\r\n\r\nA\r\n--" + b + "--"),
		"too many header rows":                  []byte("--" + b + "\r\n" + strings.Repeat("X: v\r\n", maxHeaderLines+1) + "\r\nA\r\n--" + b + "--"),
		"a header line too long for the buffer": []byte("--" + b + "\r\nX: " + strings.Repeat("v", 2*readBuffer) + "\r\n\r\nA\r\n--" + b + "--"),
		"bad header":                            []byte("--" + b + "\r\nno colon here\r\n\r\nA\r\n--" + b + "--"),
	}
	for name, in := range cases {
		_, err := readAll(in, b, 4096, true)
		if err == nil {
			t.Errorf("%s: read without an error", name)
			continue
		}
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: %v, want a malformed body", name, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("b", maxBoundary+1)} {
		if _, err := NewReader(bytes.NewReader(whole), bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("boundary %q: %v", bad, err)
		}
	}
	// A reader that failed keeps failing.
	r, _ := NewReader(bytes.NewReader([]byte("nothing")), b)
	if _, err := r.NextPart(); err == nil {
		t.Fatal("no error")
	}
	if _, err := r.NextPart(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("the second NextPart: %v", err)
	}
}

// FuzzMatchesMimeMultipart: no input makes the reader panic or hang, and
// where mime/multipart reads a body whole, this reader reads the same
// parts from it.
func FuzzMatchesMimeMultipart(f *testing.F) {
	const b = "0123456789abcdef"
	f.Add(body(f, b, "hello", "", "\r\n--"+b+"x"), 3)
	f.Add([]byte("--"+b+"\nContent-Disposition: form-data; name=\"a\"\n\nA\n--"+b+"--"), 1)
	f.Add([]byte("--"+b+" \r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nA=3D\r\n--"+b+"\t\r\n\r\n--"+b+"--"), 64)
	f.Fuzz(func(t *testing.T, in []byte, n int) {
		n = 1 + (n&0xffff)%4096
		want, werr := readAll(in, b, n, false)
		got, gerr := readAll(in, b, n, true)
		if werr != nil || len(want) == 0 && errors.Is(gerr, errNoBoundary) {
			return
		}
		// mime/multipart takes a body that ends without its closing
		// delimiter (in a part's headers, or at a delimiter with nothing
		// after it) for a body of no more parts, where this reader says
		// it ended early: the parts it read before must be the same.
		if errors.Is(gerr, errEnded) && len(got) <= len(want) && (len(got) == 0 || reflect.DeepEqual(got, want[:len(got)])) {
			return
		}
		if gerr != nil {
			t.Fatalf("mime/multipart read %d parts, this reader failed: %v", len(want), gerr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("parts differ\n got %q\nwant %q", got, want)
		}
	})
}
