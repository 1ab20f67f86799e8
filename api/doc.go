// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package api holds corral's public wire types: the JSON bodies of the
// lifecycle, execd and egress APIs (field names match the OpenSandbox
// contracts exactly), the header names, and the error codes. Server, SDK and
// CLI all use these types. It imports only the standard library.
package api
