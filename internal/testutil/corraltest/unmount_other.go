// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package corraltest

func unmountUnder(string) error { return nil }
