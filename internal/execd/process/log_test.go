// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package process

import (
	"context"
	"io"
	"testing"
	"time"
)

func TestLogFollowAndReader(t *testing.T) {
	t.Parallel()
	l, err := CreateLog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_ = l.Append(Stdout, []byte("hello "))
	_ = l.Append(Stderr, []byte("oops\n"))
	got := make(chan Record, 10)
	done := make(chan error, 1)
	go func() {
		done <- l.Follow(context.Background(), 0, nil, func(r Record) error {
			got <- Record{Stream: r.Stream, Offset: r.Offset, Data: append([]byte(nil), r.Data...)}
			return nil
		})
	}()
	_ = l.Append(Stdout, []byte("world\n"))
	l.Finish()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(got)
	var recs []Record
	for r := range got {
		recs = append(recs, r)
	}
	if len(recs) != 3 || recs[1].Stream != Stderr || recs[2].Offset != 11 || string(recs[2].Data) != "world\n" {
		t.Fatalf("records = %+v", recs)
	}
	rd, next := l.Reader(6)
	b, _ := io.ReadAll(rd)
	if string(b) != "oops\nworld\n" || next != 17 {
		t.Fatalf("Reader(6) = %q, next %d", b, next)
	}
	if rd, next := l.Reader(99); next != 17 {
		b, _ := io.ReadAll(rd)
		t.Fatalf("Reader past the end = %q, %d", b, next)
	}
}

func TestLogFollowFromOffsetAndStop(t *testing.T) {
	t.Parallel()
	l, err := CreateLog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, s := range []string{"aaaa", "bbbb", "cccc"} {
		_ = l.Append(Stdout, []byte(s))
	}
	stop := make(chan struct{})
	close(stop)
	var seen []string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = l.Follow(ctx, 5, stop, func(r Record) error { seen = append(seen, string(r.Data)); return nil })
	if err != nil || len(seen) != 2 || seen[0] != "bbbb" {
		t.Fatalf("Follow from 5 with stop = %v, %v", seen, err)
	}
}
