// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sdk

import (
	"context"
	"net/http"

	"github.com/corral-dev/corral/api"
)

// Egress is a handle to a sandbox's egress API (port 18080): its network
// policy, changed at run time without restarting anything. It exists for
// sandboxes created with a networkPolicy.
type Egress struct {
	s *Sandbox
}

// Egress resolves the egress API of sandbox id; the endpoint's headers
// carry its OPENSANDBOX-EGRESS-AUTH token.
func (c *Client) Egress(ctx context.Context, id string, opts SandboxOptions) (*Egress, error) {
	s, err := c.portClient(ctx, id, api.EgressPort, opts)
	if err != nil {
		return nil, err
	}
	return &Egress{s: s}, nil
}

// Policy returns the policy in force.
func (e *Egress) Policy(ctx context.Context) (*api.EgressPolicyStatus, error) {
	var st api.EgressPolicyStatus
	if err := e.s.call(ctx, http.MethodGet, "/policy", nil, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// AddRules merges rules in front of the policy's (they win over older
// rules for the same target); the default action stays.
func (e *Egress) AddRules(ctx context.Context, rules ...api.NetworkRule) (*api.EgressPolicyStatus, error) {
	return e.change(ctx, http.MethodPatch, rules)
}

// RemoveRules drops the rules for these targets.
func (e *Egress) RemoveRules(ctx context.Context, targets ...string) (*api.EgressPolicyStatus, error) {
	return e.change(ctx, http.MethodDelete, targets)
}

// ReplacePolicy swaps the whole policy, default action included.
func (e *Egress) ReplacePolicy(ctx context.Context, p api.NetworkPolicy) (*api.EgressPolicyStatus, error) {
	return e.change(ctx, http.MethodPut, p)
}

func (e *Egress) change(ctx context.Context, method string, body any) (*api.EgressPolicyStatus, error) {
	var st api.EgressPolicyStatus
	if err := e.s.call(ctx, method, "/policy", nil, body, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// CreateVault creates the sandbox's credential vault (the sandbox needs
// credentialProxy.enabled). Values go in and never come back.
func (e *Egress) CreateVault(ctx context.Context, req api.CredentialVaultCreateRequest) (*api.CredentialVaultState, error) {
	if req.Credentials == nil {
		req.Credentials = []api.Credential{}
	}
	if req.Bindings == nil {
		req.Bindings = []api.CredentialBinding{}
	}
	var st api.CredentialVaultState
	if err := e.s.call(ctx, http.MethodPost, "/credential-vault", nil, req, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Vault returns the vault's sanitized state.
func (e *Egress) Vault(ctx context.Context) (*api.CredentialVaultState, error) {
	var st api.CredentialVaultState
	if err := e.s.call(ctx, http.MethodGet, "/credential-vault", nil, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// UpdateVault applies a mutation, all or nothing; with ExpectedRevision
// set, a vault changed meanwhile is ErrConflict.
func (e *Egress) UpdateVault(ctx context.Context, req api.CredentialVaultMutationRequest) (*api.CredentialVaultState, error) {
	var st api.CredentialVaultState
	if err := e.s.call(ctx, http.MethodPatch, "/credential-vault", nil, req, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// DeleteVault removes the vault; injection stops at once.
func (e *Egress) DeleteVault(ctx context.Context) error {
	return e.s.call(ctx, http.MethodDelete, "/credential-vault", nil, nil, nil)
}
