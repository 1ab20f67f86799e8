// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package api

// The credential vault of the egress contract (/credential-vault on a
// sandbox's egress API). Values are write-only: no answer carries them.

// Credential is a named secret.
type Credential struct {
	Name   string           `json:"name"`
	Source CredentialSource `json:"source"`
}

// CredentialSource is where a credential's value comes from (only "inline").
type CredentialSource struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// CredentialBinding says which requests get which credential.
type CredentialBinding struct {
	Name  string          `json:"name"`
	Match CredentialMatch `json:"match"`
	Auth  CredentialAuth  `json:"auth"`
}

// CredentialMatch selects requests; empty lists take the contract's defaults.
type CredentialMatch struct {
	Schemes []string `json:"schemes,omitempty"`
	Ports   []int    `json:"ports,omitempty"`
	Hosts   []string `json:"hosts"`
	Methods []string `json:"methods,omitempty"`
	Paths   []string `json:"paths,omitempty"`
}

// CredentialAuth is how a credential is injected.
type CredentialAuth struct {
	Type       string             `json:"type"`
	Credential string             `json:"credential,omitempty"`
	Name       string             `json:"name,omitempty"`
	Headers    []CredentialHeader `json:"headers,omitempty"`
}

// CredentialHeader is one custom header and the credential that fills it.
type CredentialHeader struct {
	Name       string `json:"name"`
	Credential string `json:"credential"`
}

// CredentialVaultCreateRequest is POST /credential-vault.
type CredentialVaultCreateRequest struct {
	Credentials []Credential        `json:"credentials"`
	Bindings    []CredentialBinding `json:"bindings"`
}

// CredentialVaultMutationRequest is PATCH /credential-vault.
type CredentialVaultMutationRequest struct {
	ExpectedRevision *int64               `json:"expectedRevision,omitempty"`
	Credentials      *CredentialMutations `json:"credentials,omitempty"`
	Bindings         *BindingMutations    `json:"bindings,omitempty"`
}

// CredentialMutations adds, replaces and deletes credentials.
type CredentialMutations struct {
	Add     []Credential `json:"add,omitempty"`
	Replace []Credential `json:"replace,omitempty"`
	Delete  []string     `json:"delete,omitempty"`
}

// BindingMutations adds, replaces and deletes bindings.
type BindingMutations struct {
	Add     []CredentialBinding `json:"add,omitempty"`
	Replace []CredentialBinding `json:"replace,omitempty"`
	Delete  []string            `json:"delete,omitempty"`
}

// CredentialMetadata is what the API shows of a credential.
type CredentialMetadata struct {
	Name       string `json:"name"`
	SourceType string `json:"sourceType"`
	Revision   int64  `json:"revision"`
}

// BindingMetadata is what the API shows of a binding.
type BindingMetadata struct {
	Name     string                  `json:"name"`
	Revision int64                   `json:"revision"`
	Match    *CredentialMatch        `json:"match,omitempty"`
	Auth     *CredentialAuthMetadata `json:"auth,omitempty"`
}

// CredentialAuthMetadata is a binding's auth without credential references.
type CredentialAuthMetadata struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

// CredentialVaultState is the sanitized vault.
type CredentialVaultState struct {
	Revision    int64                `json:"revision"`
	Credentials []CredentialMetadata `json:"credentials"`
	Bindings    []BindingMetadata    `json:"bindings"`
}
