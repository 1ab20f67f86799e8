// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package sandbox owns the domain model of a sandbox: its record, its typed
// lifecycle State with the transition table, identifiers, and the validation
// rules for what users send (metadata labels, resource limits, timeouts).
// Besides the standard library it imports only api, errdefs and
// internal/insandbox (internal/archtest checks); store, lifecycle, server
// and the drivers build on it.
package sandbox
