// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sdk

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// WebSocket opcodes (RFC 6455).
const (
	wsContinuation = 0x0
	wsText         = 0x1
	wsBinary       = 0x2
	wsClose        = 0x8
	wsPing         = 0x9
	wsPong         = 0xA
)

// wsConn is the client side of a WebSocket over an upgraded HTTP
// connection. It is small on purpose: the SDK imports nothing but the
// standard library.
type wsConn struct {
	rwc io.ReadWriteCloser
	br  *bufio.Reader
	// wmu serializes frame writes.
	wmu sync.Mutex
}

const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// wsMaxMessage bounds a message read, all its fragments together.
const wsMaxMessage = 16 << 20

func wsKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.StdEncoding.EncodeToString(b[:])
}

func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

// writeFrame sends one masked frame.
func (c *wsConn) writeFrame(op byte, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	hdr := make([]byte, 0, 14)
	hdr = append(hdr, 0x80|op)
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n <= 0xFFFF:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	hdr = append(hdr, mask[:]...)
	masked := make([]byte, len(payload))
	for i, b := range payload {
		masked[i] = b ^ mask[i%4]
	}
	if _, err := c.rwc.Write(append(hdr, masked...)); err != nil {
		return err
	}
	return nil
}

// errClosed reports a close frame; Code is its status.
type wsCloseError struct {
	Code   int
	Reason string
}

func (e *wsCloseError) Error() string {
	return fmt.Sprintf("websocket closed: %d %s", e.Code, e.Reason)
}

// readMessage returns the next data message, answering pings on the way.
func (c *wsConn) readMessage() (op byte, data []byte, err error) {
	var msgOp byte
	var msg []byte
	for {
		h, err := c.readN(2)
		if err != nil {
			return 0, nil, err
		}
		fin, opcode := h[0]&0x80 != 0, h[0]&0x0F
		n := int64(h[1] & 0x7F)
		switch n {
		case 126:
			b, err := c.readN(2)
			if err != nil {
				return 0, nil, err
			}
			n = int64(binary.BigEndian.Uint16(b))
		case 127:
			b, err := c.readN(8)
			if err != nil {
				return 0, nil, err
			}
			n = int64(binary.BigEndian.Uint64(b))
		}
		// A 64-bit length with its top bit set is a protocol error (RFC
		// 6455 5.2), and would be negative here.
		if n < 0 || n > wsMaxMessage || int64(len(msg))+n > wsMaxMessage {
			return 0, nil, errors.New("websocket message larger than 16 MiB")
		}
		var mask []byte
		if h[1]&0x80 != 0 {
			if mask, err = c.readN(4); err != nil {
				return 0, nil, err
			}
		}
		// Memory follows the bytes that arrive, not the length announced.
		payload, err := io.ReadAll(io.LimitReader(c.br, n))
		if err != nil {
			return 0, nil, err
		}
		if int64(len(payload)) < n {
			return 0, nil, io.ErrUnexpectedEOF
		}
		for i := range payload {
			if mask != nil {
				payload[i] ^= mask[i%4]
			}
		}
		switch opcode {
		case wsPing:
			if err := c.writeFrame(wsPong, payload); err != nil {
				return 0, nil, err
			}
			continue
		case wsPong:
			continue
		case wsClose:
			ce := &wsCloseError{Code: 1005}
			if len(payload) >= 2 {
				ce.Code, ce.Reason = int(binary.BigEndian.Uint16(payload)), string(payload[2:])
			}
			_ = c.writeFrame(wsClose, payload[:min(2, len(payload))])
			return 0, nil, ce
		case wsContinuation:
			msg = append(msg, payload...)
		default:
			msgOp, msg = opcode, payload
		}
		if fin {
			return msgOp, msg, nil
		}
	}
}

func (c *wsConn) readN(n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(c.br, b)
	return b, err
}

func (c *wsConn) close(code int, reason string) error {
	p := binary.BigEndian.AppendUint16(nil, uint16(code))
	_ = c.writeFrame(wsClose, append(p, reason...))
	return c.rwc.Close()
}
