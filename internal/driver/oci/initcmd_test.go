// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/initproc"
	"github.com/corral-dev/corral/internal/insandbox"
)

// What the driver asks of PID 1 is what corral init parses.
func TestInitCommandIsWhatInitParses(t *testing.T) {
	spec := driver.Spec{ID: "s1", Entrypoint: []string{"python3", "-m", "http.server", "--bind", "0.0.0.0"}, ExecdToken: "tok",
		NetworkPolicy: json.RawMessage(`{"defaultAction":"deny"}`), CredentialProxy: true}
	for _, warm := range []bool{false, true} {
		args, env := initCommand(spec, initParams{hostname: "h", uid: 1000, gid: 100, warm: warm})
		if args[0] != insandbox.Binary || args[1] != "init" {
			t.Fatalf("argv %q", args)
		}
		o, err := initproc.ParseArgs(args[2:])
		if err != nil {
			t.Fatalf("corral init refuses %q: %v", args, err)
		}
		if o.ExitFD != 3 || o.ReadyFD != 4 || !o.ConsoleRelay || o.User != "1000:100" || o.TrustCA != insandbox.VaultCA ||
			o.ExecdStateDir != insandbox.ExecdStateDir || o.ExecdListen != insandbox.ExecdListen || !slices.Equal(o.Entrypoint, spec.Entrypoint) {
			t.Fatalf("warm=%v: parsed %+v", warm, o)
		}
		if warm != (o.WaitStart != "" && o.ExecdTokenFile != "" && o.ExecdEnvFile != "") {
			t.Fatalf("warm=%v: hand-over files %+v", warm, o)
		}
		// A warm sandbox's verifier is in the token file, not its environment.
		if hasVar(env, "EXECD_ACCESS_TOKEN") == warm || !hasVar(env, "SSL_CERT_FILE") {
			t.Fatalf("warm=%v: env %q", warm, env)
		}
	}
}
