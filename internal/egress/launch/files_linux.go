// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package launch

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/egress/mitm"
	"github.com/corral-dev/corral/internal/egress/policy"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/safefile"
)

// APISocket is where a sandbox's enforcer serves the egress API: a Unix
// socket on the host, in the sandbox's directory. The API has no
// listener inside the sandbox, so code there cannot take its port over
// and be handed the token (the endpoint of port 18080 leads here).
func APISocket(dir string) string { return filepath.Join(dir, "api.sock") }

// ResolvConf is the sandbox's /etc/resolv.conf: the enforcer's DNS.
const ResolvConf = "nameserver 127.0.0.1\noptions ndots:0\n"

// state is what a sandbox's directory keeps about its enforcer.
type state struct {
	Addr      netip.Addr `json:"addr"`
	Pid       int        `json:"pid"`
	StartTime uint64     `json:"startTime"`
}

// TrustEnv is the environment that points the usual TLS clients at the
// bundle that includes the sandbox's CA.
func TrustEnv() map[string]string {
	return map[string]string{"SSL_CERT_FILE": insandbox.CABundle, "REQUESTS_CA_BUNDLE": insandbox.CABundle,
		"CURL_CA_BUNDLE": insandbox.CABundle, "NODE_EXTRA_CA_CERTS": insandbox.VaultCA}
}

// CAFile is the CA certificate to mount at insandbox.VaultCA, "" when the
// sandbox has no credential vault.
func CAFile(dir string) string {
	p := filepath.Join(dir, mitm.CACertFile)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// Sandbox is what Prepare needs of a sandbox.
type Sandbox struct {
	ID string
	// Policy is the network policy, as the create request gave it.
	Policy json.RawMessage
	// Token guards the enforcer's API.
	Token string
	// CredentialProxy gives the sandbox a CA of its own for the vault.
	CredentialProxy bool
}

// Prepare checks the policy and writes the sandbox's directory: the seed
// policy, the API token and the resolv.conf the runtime mounts at
// /etc/resolv.conf; with a credential proxy, a new CA too.
func Prepare(dir string, sb Sandbox) error {
	pol, err := policy.Decode(sb.Policy)
	if err != nil {
		return errdefs.Wrap(errdefs.ErrInvalidArgument, api.CodeInvalidParameter, "networkPolicy: "+err.Error(), err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	seed, _ := json.Marshal(pol)
	for name, body := range map[string][]byte{"policy.json": seed, "token": []byte(sb.Token), "resolv.conf": []byte(ResolvConf)} {
		mode := os.FileMode(0o600)
		if name == "resolv.conf" {
			mode = 0o644
		}
		if err := os.WriteFile(filepath.Join(dir, name), body, mode); err != nil {
			return err
		}
	}
	if sb.CredentialProxy {
		return mitm.CreateCA(dir, "corral sandbox "+sb.ID)
	}
	return nil
}

// The sandbox's directory is the server's, but its enforcer (a root
// process that parses the sandbox's traffic) writes there too: what the
// server reads back is read as it would read a sandbox's files, and
// written without following a link (internal/safefile).

func writeState(dir string, st state) error {
	b, _ := json.Marshal(st)
	return safefile.WriteFileAtomic(dir, "state.json", b, 0o600)
}

func readState(dir string) (state, bool) {
	var st state
	b, _, err := safefile.ReadFile(dir, "state.json", 64<<10)
	if err != nil || json.Unmarshal(b, &st) != nil {
		return st, false
	}
	return st, true
}
