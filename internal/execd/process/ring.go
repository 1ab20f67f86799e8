// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package process

// ptyRingSize is how much of a PTY session's output is kept for replay.
const ptyRingSize = 1 << 20

// ring keeps the last ptyRingSize bytes of output and the total count.
type ring struct {
	buf   []byte
	total int64 // bytes ever written
}

func (r *ring) write(p []byte) {
	r.total += int64(len(p))
	r.buf = append(r.buf, p...)
	if over := len(r.buf) - ptyRingSize; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
	}
}

// since returns the bytes from offset off (or the oldest kept) and where
// they start.
func (r *ring) since(off int64) ([]byte, int64) {
	start := r.total - int64(len(r.buf))
	off = max(off, start)
	if off >= r.total {
		return nil, r.total
	}
	return append([]byte(nil), r.buf[off-start:]...), off
}
