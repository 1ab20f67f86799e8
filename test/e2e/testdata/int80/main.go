// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command int80 makes one system call through the 32-bit x86 entry point
// (int $0x80: getpid, number 20 there) and prints what it returned. The
// escape suite runs it in a sandbox, where that entry point is refused.
package main

import "fmt"

// int80 is in int80_amd64.s.
func int80(nr uintptr) int64

func main() { fmt.Println(int80(20)) }
