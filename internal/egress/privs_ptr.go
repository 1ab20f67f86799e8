// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package egress

import "unsafe"

// uintptrOf passes a pointer to a raw system call.
func uintptrOf[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }
