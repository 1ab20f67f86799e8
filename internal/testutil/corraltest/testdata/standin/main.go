// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command standin is what a tenant would put where corral's init goes,
// for the tests that check no host-side bound rests on PID 1: it holds
// every descriptor corral init gets and abuses each, floods its stdout,
// and answers 200 to anything on execd's port.
package main

import (
	"bytes"
	"net"
	"os"
	"time"
)

func main() {
	// The exit file (fd 3): written without end.
	go func() {
		f := os.NewFile(3, "exit")
		chunk := bytes.Repeat([]byte("9"), 64<<10)
		for {
			if _, err := f.Write(chunk); err != nil {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	// The console: flooded.
	go func() {
		line := append(bytes.Repeat([]byte("flood "), 1000), '\n')
		for {
			if _, err := os.Stdout.Write(line); err != nil {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	// Anything on execd's port gets a 200.
	if ln, err := net.Listen("tcp", ":44772"); err == nil {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					_ = c.SetDeadline(time.Now().Add(2 * time.Second))
					buf := make([]byte, 4096)
					_, _ = c.Read(buf)
					_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
				}()
			}
		}()
	}
	// Flood a while before saying it is ready (fd 4), as corral init
	// says once execd's port is bound.
	time.Sleep(time.Second)
	if ready := os.NewFile(4, "ready"); ready != nil {
		_, _ = ready.Write([]byte("\n"))
		ready.Close()
	}
	select {}
}
