// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"path/filepath"
	"testing"
)

// Where the CLI connects, by precedence; resolved without dialing, so the
// default address need not be free on the machine running the test.
func TestClientPrecedence(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "config.toml") // no profiles: the file does not exist
	for _, tc := range []struct {
		name string
		flag string
		vars map[string]string
		want string
	}{
		{"nothing configured", "", nil, "http://localhost:8080"},
		{"OpenSandbox domain", "", map[string]string{"OPEN_SANDBOX_DOMAIN": "sbx.example:9"}, "http://sbx.example:9"},
		{"OpenSandbox protocol", "", map[string]string{"OPEN_SANDBOX_DOMAIN": "sbx.example:9", "OPEN_SANDBOX_PROTOCOL": "https"}, "https://sbx.example:9"},
		{"CORRAL_SERVER first", "", map[string]string{"CORRAL_SERVER": "http://a.example:1", "OPEN_SANDBOX_DOMAIN": "b.example:2"}, "http://a.example:1"},
		{"the flag first", "http://f.example:3", map[string]string{"CORRAL_SERVER": "http://a.example:1"}, "http://f.example:3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{Getenv: func(k string) string {
				if k == "CORRAL_CONFIG" {
					return conf
				}
				return tc.vars[k]
			}}
			f := clientFlags{server: tc.flag, output: "table", formats: []string{"table"}}
			c, err := f.client(e)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.BaseURL(); got != tc.want {
				t.Errorf("server = %q, want %q", got, tc.want)
			}
		})
	}
}
