// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package auth

import "time"

// APIKey is a stored API key. Hash is the hex SHA-256 of the key; the key
// itself is never stored.
type APIKey struct {
	ID        string
	Tenant    string
	Name      string
	Hash      string
	Prefix    string
	Admin     bool
	CreatedAt time.Time
	RevokedAt time.Time
}
