// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package jupyter

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
)

// ProtocolVersion is the version of the messaging protocol spoken.
const ProtocolVersion = "5.3"

// delimiter separates routing identities from a message's frames.
var delimiter = []byte("<IDS|MSG>")

// ErrBadSignature is a message whose HMAC does not match: it is dropped.
var ErrBadSignature = errors.New("jupyter: message signature does not match")

// Header is a message header (and a parent header: empty in a request).
type Header struct {
	MsgID    string `json:"msg_id,omitempty"`
	Session  string `json:"session,omitempty"`
	Username string `json:"username,omitempty"`
	Date     string `json:"date,omitempty"`
	MsgType  string `json:"msg_type,omitempty"`
	Version  string `json:"version,omitempty"`
}

// Message is one protocol message.
type Message struct {
	Header   Header
	Parent   Header
	Metadata json.RawMessage
	Content  json.RawMessage
	Buffers  [][]byte
}

// Type is the message's msg_type.
func (m Message) Type() string { return m.Header.MsgType }

// signer signs and checks messages with one connection's key.
type signer struct{ key []byte }

func (s signer) mac() hash.Hash { return hmac.New(sha256.New, s.key) }

// encode frames m for a DEALER socket: no routing identities.
func (s signer) encode(m Message) ([][]byte, error) {
	h, err := json.Marshal(m.Header)
	if err != nil {
		return nil, err
	}
	p, err := json.Marshal(m.Parent)
	if err != nil {
		return nil, err
	}
	md := m.Metadata
	if len(md) == 0 {
		md = json.RawMessage("{}")
	}
	c := m.Content
	if len(c) == 0 {
		c = json.RawMessage("{}")
	}
	mac := s.mac()
	for _, part := range [][]byte{h, p, md, c} {
		mac.Write(part)
	}
	sig := []byte(hex.EncodeToString(mac.Sum(nil)))
	frames := [][]byte{delimiter, sig, h, p, md, c}
	return append(frames, m.Buffers...), nil
}

// decode parses frames (routing identities first, if any) and checks the
// signature.
func (s signer) decode(frames [][]byte) (Message, error) {
	i := 0
	for i < len(frames) && !bytes.Equal(frames[i], delimiter) {
		i++
	}
	if len(frames)-i < 6 {
		return Message{}, fmt.Errorf("jupyter: a message needs a delimiter and 5 frames, got %d frames", len(frames))
	}
	f := frames[i+1:]
	want := make([]byte, sha256.Size)
	if n, err := hex.Decode(want, f[0]); err != nil || n != sha256.Size {
		return Message{}, ErrBadSignature
	}
	mac := s.mac()
	for _, part := range f[1:5] {
		mac.Write(part)
	}
	if !hmac.Equal(mac.Sum(nil), want) {
		return Message{}, ErrBadSignature
	}
	var m Message
	if err := json.Unmarshal(f[1], &m.Header); err != nil {
		return Message{}, fmt.Errorf("jupyter: header: %w", err)
	}
	if err := json.Unmarshal(f[2], &m.Parent); err != nil {
		return Message{}, fmt.Errorf("jupyter: parent header: %w", err)
	}
	// The frames are the message's own, not copied: zmq4 reads each
	// frame into a slice of its own (printed output can be one frame of
	// hundreds of megabytes; a copy doubled execd's memory for it).
	// TestKernelRoundTripKeepsState checks that a later message leaves an
	// earlier one as it was.
	m.Metadata = json.RawMessage(f[3])
	m.Content = json.RawMessage(f[4])
	m.Buffers = append(m.Buffers, f[5:]...)
	return m, nil
}
