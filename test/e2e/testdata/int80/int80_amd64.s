// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

#include "textflag.h"

// func int80(nr uintptr) int64
TEXT ·int80(SB),NOSPLIT,$0-16
	MOVQ nr+0(FP), AX
	INT $0x80
	MOVQ AX, ret+8(FP)
	RET
