// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progress draws a transfer's progress on a terminal, at most ten times a
// second; on anything else it draws nothing.
type progress struct {
	w     io.Writer
	label string
	total int64 // 0: unknown
	done  atomic.Int64
	start time.Time
	stop  chan struct{}
	wg    sync.WaitGroup
}

// newProgress starts drawing on w if it is a terminal; otherwise it
// returns a progress that only counts.
func newProgress(w io.Writer, label string, total int64) *progress {
	p := &progress{w: w, label: label, total: total, start: time.Now(), stop: make(chan struct{})}
	if !isTerminal(w) {
		p.w = nil
		return p
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw(false)
			}
		}
	}()
	return p
}

func (p *progress) add(n int) { p.done.Add(int64(n)) }

// finish stops drawing and leaves a final line.
func (p *progress) finish() {
	close(p.stop)
	p.wg.Wait()
	if p.w != nil {
		p.draw(true)
	}
}

func (p *progress) draw(final bool) {
	done := p.done.Load()
	secs := time.Since(p.start).Seconds()
	rate := ""
	if secs > 0 {
		rate = bytesHuman(int64(float64(done)/secs)) + "/s"
	}
	line := fmt.Sprintf("%s  %s", p.label, bytesHuman(done))
	if p.total > 0 {
		pct := min(100, done*100/p.total)
		width := 24
		filled := int(pct) * width / 100
		line = fmt.Sprintf("%s  [%s%s] %3d%%  %s / %s", p.label, strings.Repeat("=", filled), strings.Repeat(" ", width-filled), pct, bytesHuman(done), bytesHuman(p.total))
	}
	end := ""
	if final {
		end = "\n"
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s  %s%s", line, rate, end)
}

func bytesHuman(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// countingReader counts what passes through it into a progress.
type countingReader struct {
	r io.Reader
	p *progress
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.add(n)
	return n, err
}

// countingWriter counts what passes through it into a progress.
type countingWriter struct {
	w io.Writer
	p *progress
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.p.add(n)
	return n, err
}
