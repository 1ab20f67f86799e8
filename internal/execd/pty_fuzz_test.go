// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/coder/websocket"
)

// Whatever a PTY client sends decodes to a known frame or an error, and
// stdin reaches the program byte for byte.
func FuzzDecodeClientFrame(f *testing.F) {
	for _, s := range []string{
		"\x00ls\n", "\x01x", "", `{"type":"stdin","data":"hi"}`, `{"type":"resize","cols":80,"rows":24}`,
		`{"type":"signal","signal":"SIGINT"}`, `{"type":"stdin_eof"}`, `{"type":"ping"}`, `{"type":"bogus"}`,
		`{"type":"resize","cols":1e400}`, `[1,2]`, `{"type":"stdin","data":"\ud800"}`,
	} {
		f.Add(true, []byte(s))
		f.Add(false, []byte(s))
	}
	f.Fuzz(func(t *testing.T, binary bool, data []byte) {
		typ := websocket.MessageText
		if binary {
			typ = websocket.MessageBinary
		}
		fr, err := decodeClientFrame(typ, data)
		if err != nil {
			if fr.kind != "" {
				t.Fatalf("an error and a frame %+v", fr)
			}
			return
		}
		switch fr.kind {
		case "stdin":
			if binary && !bytes.Equal(fr.data, data[1:]) {
				t.Fatalf("stdin %q from frame %q", fr.data, data)
			}
		case "resize", "signal", "stdin_eof", "ping":
			if binary {
				t.Fatalf("binary frame %q decoded as %s", data, fr.kind)
			}
		default:
			t.Fatalf("frame %q decoded to unknown kind %q", data, fr.kind)
		}
		if !binary && !json.Valid(data) {
			t.Fatalf("invalid JSON %q accepted", data)
		}
	})
}
