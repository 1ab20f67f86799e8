// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package initproc

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// What Argv builds, corral init parses back to the same options, every
// field included.
func TestOptionsRoundTrip(t *testing.T) {
	full := Options{NoExecd: true, ExecdListen: "127.0.0.1:1", ExecdStateDir: "/s", ReadyFD: 4, ExitFD: 3, ExitPath: "/x", GateFD: 5, ConsoleLimit: 1 << 20,
		WaitStart: "/w/start", WaitStartFile: "/w/start.json", WaitURL: "https://127.0.0.1:18080/healthz", WaitTimeout: 90 * time.Second,
		ExecdTokenFile: "/w/token", ExecdEnvFile: "/w/env", User: "1000:1000", IsolateNetwork: "44772,18080",
		TrustCA: "/etc/ca.pem", ConsoleRelay: true, Entrypoint: []string{"sh", "-c", "echo --not-a-flag"}}
	v := reflect.ValueOf(full)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the test leaves %s unset", v.Type().Field(i).Name)
		}
	}
	for _, o := range []Options{DefaultOptions(), full, {ExecdListen: DefaultOptions().ExecdListen, ExecdStateDir: DefaultOptions().ExecdStateDir,
		WaitTimeout: DefaultOptions().WaitTimeout, Entrypoint: []string{"--", "-x"}}} {
		argv := o.Argv("/bin/corral")
		if argv[0] != "/bin/corral" || argv[1] != "init" {
			t.Fatalf("argv %q", argv)
		}
		got, err := ParseArgs(argv[2:])
		if err != nil {
			t.Fatalf("%q: %v", argv, err)
		}
		if len(o.Entrypoint) == 0 {
			o.Entrypoint = []string{}
		}
		if !reflect.DeepEqual(got, o) {
			t.Fatalf("argv %q parses to\n%+v\nwant\n%+v", argv, got, o)
		}
	}
	// Defaults are left out.
	if argv := DefaultOptions().Argv("c"); !slices.Equal(argv, []string{"c", "init", "--"}) {
		t.Fatalf("default argv %q", argv)
	}
}
