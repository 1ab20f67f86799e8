// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package jupyter runs Jupyter kernels and speaks the Jupyter messaging
// protocol (v5.3) to them, with no notebook server between: it finds
// kernelspecs in the standard data directories, launches a kernel with a
// connection file of its own (random HMAC key, loopback ports, its own
// process group), signs and checks every message with HMAC-SHA256, and
// runs code with the kernel's iopub output handed over as it arrives,
// filtered by the request it answers.
//
// ZMTP (the ZeroMQ wire protocol) is github.com/go-zeromq/zmq4, pure Go,
// so the binary stays CGO_ENABLED=0. The message layer above it is
// written here: no maintained Go client of the Jupyter protocol exists,
// and what a client needs is small (framing, signatures, matching replies
// and output to requests, the kernel_info handshake that closes the
// slow-joiner race on iopub).
//
// Only internal/execd/code imports it.
package jupyter
