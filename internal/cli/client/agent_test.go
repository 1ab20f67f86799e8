// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// Bad --credential values are refused before anything is dialled, with
// a sentence naming the flag, and never echo a credential's value.
func TestAgentRefusesBadCredentials(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "config.toml")
	vars := map[string]string{"CORRAL_CONFIG": conf, "TOKEN": "tok-value-1234", "EMPTY": ""}
	base := []string{"--server", "http://127.0.0.1:9", "--api-key", "k", "--model-url", "http://127.0.0.1:9/v1", "--model", "m",
		"--task", "x", "--out-dir", filepath.Join(t.TempDir(), "out")}
	for _, tc := range []struct {
		cred, want string
	}{
		{"api.example.com", "give HOST=ENV"},
		{"=TOKEN", "give HOST=ENV"},
		{"api.example.com=", "give HOST=ENV"},
		{"api.example.com=UNSET", "$UNSET is empty or not set"},
		{"api.example.com=EMPTY", "$EMPTY is empty or not set"},
		{"https://api.example.com=TOKEN", "give a host name"},
		{"*.example.com=TOKEN", "give a host name"},
		{"api.example.com:443=TOKEN", "give a host name"},
	} {
		t.Run(tc.cred, func(t *testing.T) {
			var stderr bytes.Buffer
			e := &env{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(k string) string { return vars[k] }}
			code := runAgent(context.Background(), e, append(append([]string{}, base...), "--credential", tc.cred))
			if code != 1 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, stderr.String(), tc.want)
			}
			if strings.Contains(stderr.String(), vars["TOKEN"]) {
				t.Fatalf("the error shows the credential: %q", stderr.String())
			}
		})
	}
}
