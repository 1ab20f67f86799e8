// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package api

// ErrorResponse is the body of every lifecycle error.
type ErrorResponse struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes that clients of the lifecycle API see. Kind-generic codes live
// in package errhttp; these are the specific ones.
const (
	CodeMissingAPIKey          = "MISSING_API_KEY"
	CodeInvalidAPIKey          = "INVALID_API_KEY"
	CodeInvalidParameter       = "SANDBOX::INVALID_PARAMETER"
	CodeInvalidRequestBody     = "SANDBOX::INVALID_REQUEST_BODY"
	CodeInvalidMetadataLabel   = "SANDBOX::INVALID_METADATA_LABEL"
	CodeInvalidMetadataFormat  = "INVALID_METADATA_FORMAT"
	CodeInvalidExpiration      = "SANDBOX::INVALID_EXPIRATION"
	CodeInvalidResourceLimit   = "SANDBOX::INVALID_RESOURCE_LIMIT"
	CodeSandboxNotFound        = "SANDBOX::NOT_FOUND"
	CodeSandboxInvalidState    = "SANDBOX::INVALID_STATE"
	CodeAPINotSupported        = "SANDBOX::API_NOT_SUPPORTED"
	CodeUnsupportedPoolRef     = "SANDBOX::UNSUPPORTED_POOL_REF"
	CodeIdempotencyKeyMismatch = "SANDBOX::IDEMPOTENCY_KEY_MISMATCH"
	CodeSandboxStartFailed     = "SANDBOX::START_FAILED"
	CodeSnapshotNotFound       = "SNAPSHOT::NOT_FOUND"
	CodeSnapshotNotReady       = "SNAPSHOT::NOT_READY"
	CodeSnapshotInvalidSource  = "SNAPSHOT::INVALID_SOURCE_STATE"
	CodeProxyUpstream          = "PROXY::UPSTREAM_UNREACHABLE"
	CodeRouteNotFound          = "ROUTE_NOT_FOUND"
	CodeMethodNotAllowed       = "METHOD_NOT_ALLOWED"
	CodeKeyNotFound            = "KEY::NOT_FOUND"
	CodeHostNotAllowed         = "HOST_NOT_ALLOWED"
	CodeOriginNotAllowed       = "ORIGIN_NOT_ALLOWED"
)
