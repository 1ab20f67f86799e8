// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sdk

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// rw is a connection that reads from a fixed input and discards writes.
type rw struct{ io.Reader }

func (rw) Write(p []byte) (int, error) { return len(p), nil }
func (rw) Close() error                { return nil }

// Whatever the other end sends, reading it ends in messages, a close or
// an error: never a panic, never a message past the size bound.
func FuzzWSReadMessage(f *testing.F) {
	for _, s := range [][]byte{
		{0x82, 0x03, 1, 2, 3},                                        // binary
		{0x01, 0x01, 'a', 0x80, 0x01, 'b'},                           // text in two fragments
		{0x89, 0x00, 0x81, 0x00},                                     // ping, then empty text
		{0x88, 0x02, 0x0f, 0xa1},                                     // close 4001
		{0x82, 0xfe, 0x00, 0x02, 0, 0, 0, 0, 1, 2},                   // masked, 16-bit length
		{0x82, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, // a length past int64
		{0x82, 0x7f, 0, 0, 0, 0, 0x01, 0, 0, 0},                      // 16 MiB
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c := &wsConn{rwc: rw{bytes.NewReader(in)}, br: bufio.NewReader(bytes.NewReader(in))}
		for range 64 {
			_, msg, err := c.readMessage()
			if err != nil {
				var ce *wsCloseError
				_ = errors.As(err, &ce)
				return
			}
			if len(msg) > wsMaxMessage {
				t.Fatalf("a %d-byte message", len(msg))
			}
		}
	})
}
