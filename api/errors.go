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
	CodeMissingAPIKey           = "MISSING_API_KEY"
	CodeInvalidAPIKey           = "INVALID_API_KEY"
	CodeInvalidParameter        = "SANDBOX::INVALID_PARAMETER"
	CodeInvalidRequestBody      = "SANDBOX::INVALID_REQUEST_BODY"
	CodeInvalidMetadataLabel    = "SANDBOX::INVALID_METADATA_LABEL"
	CodeInvalidMetadataFormat   = "INVALID_METADATA_FORMAT"
	CodeInvalidExpiration       = "SANDBOX::INVALID_EXPIRATION"
	CodeInvalidResourceLimit    = "SANDBOX::INVALID_RESOURCE_LIMIT"
	CodeSandboxNotFound         = "SANDBOX::NOT_FOUND"
	CodeSandboxInvalidState     = "SANDBOX::INVALID_STATE"
	CodeAPINotSupported         = "SANDBOX::API_NOT_SUPPORTED"
	CodeUnsupportedPoolRef      = "SANDBOX::UNSUPPORTED_POOL_REF"
	CodeIsolationNotAllowed     = "SANDBOX::ISOLATION_NOT_ALLOWED"
	CodeIdempotencyKeyMismatch  = "SANDBOX::IDEMPOTENCY_KEY_MISMATCH"
	CodeSandboxStartFailed      = "SANDBOX::START_FAILED"
	CodeSnapshotNotFound        = "SNAPSHOT::NOT_FOUND"
	CodeSnapshotNotReady        = "SNAPSHOT::NOT_READY"
	CodeSnapshotInvalidSource   = "SNAPSHOT::INVALID_SOURCE_STATE"
	CodeVolumeInvalidName       = "VOLUME::INVALID_NAME"
	CodeVolumeDuplicateName     = "VOLUME::DUPLICATE_NAME"
	CodeVolumeInvalidBackend    = "VOLUME::INVALID_BACKEND"
	CodeVolumeInvalidMountPath  = "VOLUME::INVALID_MOUNT_PATH"
	CodeVolumeInvalidSubPath    = "VOLUME::INVALID_SUB_PATH"
	CodeVolumeInvalidHostPath   = "VOLUME::INVALID_HOST_PATH"
	CodeVolumeHostPathForbidden = "VOLUME::HOST_PATH_NOT_ALLOWED"
	CodeVolumeHostPathNotFound  = "VOLUME::HOST_PATH_NOT_FOUND"
	CodeVolumeInvalidPVCName    = "VOLUME::INVALID_PVC_NAME"
	CodeVolumeUnsupported       = "VOLUME::UNSUPPORTED_BACKEND"
	CodeVolumePVCNotFound       = "VOLUME::PVC_NOT_FOUND"
	// CodeVolumeNotFound and CodeVolumeInUse are corral's, of /v1/volumes.
	CodeVolumeNotFound = "VOLUME::NOT_FOUND"
	CodeVolumeInUse    = "VOLUME::IN_USE"
	// CodeSnapshotCaptureFailed is corral's: a capture that failed (a fork's).
	CodeSnapshotCaptureFailed = "SNAPSHOT::CAPTURE_FAILED"
	// CodeSnapshotQuota is corral's: the tenant holds as many snapshots,
	// or as many bytes of them, as the server allows.
	CodeSnapshotQuota    = "SNAPSHOT::QUOTA_EXCEEDED"
	CodeProxyUpstream    = "PROXY::UPSTREAM_UNREACHABLE"
	CodeRouteNotFound    = "ROUTE_NOT_FOUND"
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	CodeKeyNotFound      = "KEY::NOT_FOUND"
	CodeHostNotAllowed   = "HOST_NOT_ALLOWED"
	CodeOriginNotAllowed = "ORIGIN_NOT_ALLOWED"
	// CodeDiagnosticsNotImplemented is the diagnostics API's 501.
	CodeDiagnosticsNotImplemented = "DIAGNOSTICS_NOT_IMPLEMENTED"
)

// More error codes of the lifecycle API and of corral mcp's tools, by
// area. Every code a response can carry is a constant here (or one of
// errhttp's generic ones); internal/archtest refuses a code literal
// anywhere else. The convention is the contract's AREA::NAME; the
// un-namespaced ones above are OpenSandbox's own spellings.
const (
	CodeBudgetSandboxes = "BUDGET::SANDBOXES"
	CodeBudgetSnapshots = "BUDGET::SNAPSHOTS"
	CodeBudgetToolCalls = "BUDGET::TOOL_CALLS"
	CodeBudgetWallTime  = "BUDGET::WALL_TIME"

	CodeGeneralUnknownError = "GENERAL::UNKNOWN_ERROR"

	CodeImageBadUser             = "IMAGE::BAD_USER"
	CodeImageBadWorkdir          = "IMAGE::BAD_WORKDIR"
	CodeImageEmpty               = "IMAGE::EMPTY"
	CodeImageHostImageDisabled   = "IMAGE::HOST_IMAGE_DISABLED"
	CodeImageInvalidArchive      = "IMAGE::INVALID_ARCHIVE"
	CodeImageInvalidPlatform     = "IMAGE::INVALID_PLATFORM"
	CodeImageInvalidReference    = "IMAGE::INVALID_REFERENCE"
	CodeImageLayerMismatch       = "IMAGE::LAYER_MISMATCH"
	CodeImageNotFound            = "IMAGE::NOT_FOUND"
	CodeImagePlatformUnavailable = "IMAGE::PLATFORM_UNAVAILABLE"
	CodeImagePullFailed          = "IMAGE::PULL_FAILED"
	CodeImageRegistryUnreachable = "IMAGE::REGISTRY_UNREACHABLE"
	CodeImageTooLarge            = "IMAGE::TOO_LARGE"
	CodeImageUnauthorized        = "IMAGE::UNAUTHORIZED"

	CodeKeyInvalidName   = "KEY::INVALID_NAME"
	CodeKeyInvalidTenant = "KEY::INVALID_TENANT"
	CodeKeyLastAdmin     = "KEY::LAST_ADMIN"
	CodeKeyTooShort      = "KEY::TOO_SHORT"

	CodeSandboxAlreadyExists        = "SANDBOX::ALREADY_EXISTS"
	CodeSandboxConflict             = "SANDBOX::CONFLICT"
	CodeSandboxDiskLimitUnsupported = "SANDBOX::DISK_LIMIT_UNSUPPORTED"
	CodeSandboxEgressFailed         = "SANDBOX::EGRESS_FAILED"
	CodeSandboxImageNotFound        = "SANDBOX::IMAGE_NOT_FOUND"
	CodeSandboxInvalidPort          = "SANDBOX::INVALID_PORT"
	CodeSandboxNotRunning           = "SANDBOX::NOT_RUNNING"
	CodeSandboxPortForwardFailed    = "SANDBOX::PORT_FORWARD_FAILED"
	CodeSandboxRuntimeForbidden     = "SANDBOX::RUNTIME_FORBIDDEN"
	CodeSandboxRuntimeUnavailable   = "SANDBOX::RUNTIME_UNAVAILABLE"
	CodeSandboxTooManyEndpoints     = "SANDBOX::TOO_MANY_ENDPOINTS"

	CodeSecretForbidden    = "SECRET::FORBIDDEN"
	CodeSecretInvalidName  = "SECRET::INVALID_NAME"
	CodeSecretInvalidValue = "SECRET::INVALID_VALUE"
	CodeSecretRateLimited  = "SECRET::RATE_LIMITED"
)
