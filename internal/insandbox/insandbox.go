// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package insandbox holds the fixed points of the interface between a
// runtime and what it starts inside a sandbox: where the corral binary,
// execd's state and the credential vault's CA are inside, the ports of
// execd and the egress API, and the capability set a sandbox's processes
// keep. Every runtime (oci, docker, the
// Kubernetes controller) and every in-sandbox role (corral init, execd,
// corral egress) takes them from here, so that they cannot drift apart.
// Each runtime's own hand-over files (warm pools' start FIFOs and token
// files) stay in that runtime. A leaf: it imports only api.
package insandbox

import (
	"strings"

	"github.com/corral-dev/corral/api"
)

const (
	// BinaryDir is where the runtime mounts (or copies) the corral
	// binary, read-only.
	BinaryDir = "/.corral"
	// Binary is the corral binary PID 1 runs as `corral init`.
	Binary = BinaryDir + "/corral"
	// ExecdStateDir is where execd keeps command output, on the
	// sandbox's writable layer.
	ExecdStateDir = "/var/lib/corral-execd"
	// VaultCA is the sandbox's own credential-vault CA, which the runtime
	// mounts when the sandbox has a credential proxy.
	VaultCA = "/etc/corral/vault-ca.pem"
	// CABundle is the system CA bundle plus VaultCA that corral init
	// writes (SSL_CERT_FILE and friends point there).
	CABundle = "/etc/ssl/corral-ca-bundle.pem"
	// SecretsDir is where the runtime mounts the directory of a
	// sandbox's secrets socket (internal/secrets), read-only.
	SecretsDir = "/run/corral"
	// ExitFile is where PID 1 writes its exit code in the sandbox's root
	// when the runtime can hand it no pipe (a runsc without --pass-fd).
	ExitFile = "/.corral-exit"
	// GateFile is the FIFO a policed Docker sandbox's PID 1 waits on
	// until the enforcer's rules are in.
	GateFile = "/.corral-gate"
	// ImageBinary is where corral's own image (the Docker egress
	// sidecar's, the Kubernetes install container's) holds the binary.
	ImageBinary = "/corral"
	// ExecdEnvs is the file corral init makes for the entrypoint and
	// exports as EXECD_ENVS (unless the image or the request names one):
	// KEY=VALUE lines the entrypoint writes there reach later commands.
	ExecdEnvs = "/.corral-execd-envs"

	// ExecdPort is execd's TCP port in the sandbox's network namespace.
	ExecdPort = api.ExecdPort
	// EgressPort is the egress API's port in the namespace (a sidecar's).
	EgressPort = api.EgressPort
	// VaultProxyPort is the credential proxy's port on the namespace's
	// loopback.
	VaultProxyPort = 18081
)

// Listen addresses inside the sandbox's network namespace (their ports
// are the ones above; a test checks).
const (
	ExecdListen      = ":44772"
	EgressListen     = "0.0.0.0:18080"
	EgressLoopback   = "127.0.0.1:18080"
	VaultProxyListen = "127.0.0.1:18081"
)

// Capabilities is the capability set a sandbox's processes keep, on
// every runtime (names without the CAP_ prefix; a new slice each call):
// Docker's default set without MKNOD (no device files), NET_RAW (no
// forged packets or ICMP sockets past the egress rules), AUDIT_WRITE and
// SETFCAP (no file capabilities to hand on).
func Capabilities() []string {
	return []string{"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "SETGID", "SETUID",
		"SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL"}
}

// ExecdTokenEnv carries execd's access token (or its verifier) to the
// sandbox's PID 1; ExecdEnvPrefix starts the names of corral's other
// execd settings. Only execd may see either.
const (
	ExecdTokenEnv  = "EXECD_ACCESS_TOKEN"
	ExecdEnvPrefix = "CORRAL_EXECD_"
)

// UserEnv is environ without what only execd may see: what the
// entrypoint and every command run through execd start with.
func UserEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name == ExecdTokenEnv || strings.HasPrefix(name, ExecdEnvPrefix) {
			continue
		}
		out = append(out, kv)
	}
	return out
}
