// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package api

import "time"

// APIKey describes an API key. Key is set only in the answer to a create.
type APIKey struct {
	ID        string     `json:"id"`
	Tenant    string     `json:"tenant"`
	Name      string     `json:"name,omitempty"`
	Prefix    string     `json:"prefix"`
	Admin     bool       `json:"admin"`
	CreatedAt time.Time  `json:"createdAt"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	Key       string     `json:"key,omitempty"`
}

// CreateAPIKeyRequest is the body of POST /admin/keys.
type CreateAPIKeyRequest struct {
	Tenant string `json:"tenant"`
	Name   string `json:"name,omitempty"`
	Admin  bool   `json:"admin,omitempty"`
}

// ListAPIKeysResponse is the body of GET /admin/keys.
type ListAPIKeysResponse struct {
	Items []APIKey `json:"items"`
}
