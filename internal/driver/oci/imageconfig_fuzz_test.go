// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"bytes"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// An image's author writes its config and its /etc/passwd and
// /etc/group: whatever they hold, what the sandbox is built from is sane
// (an absolute clean working directory, one value per variable with the
// user's winning, numbers for the user) or the create fails with a reason.
func FuzzImageConfig(f *testing.F) {
	for _, s := range []struct{ config, passwd, group string }{
		{`{"config":{"User":"app","Env":["A=1","PATH=/x"],"WorkingDir":"/srv"}}`, "app:x:1000:1000::/home/app:/bin/sh\n", "app:x:1000:\n"},
		{`{"config":{"User":"1:2","WorkingDir":"rel"}}`, "", ""},
		{`{"config":{"User":"app:grp","WorkingDir":"/a/../b"}}`, "app:x:5:6\n", "grp:x:7\n"},
		{`{"config":{"User":":","Env":["=x","A","A=2"]}}`, "::::\n", "\n"},
		{`{"config":{"WorkingDir":"/a\u0000b"}}`, "root:x:0:0\n", ""},
		{`[]`, "", ""}, {`{"config":{"User":"99999999999"}}`, "", ""},
	} {
		f.Add([]byte(s.config), []byte(s.passwd), []byte(s.group))
	}
	root := f.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, config, passwd, group []byte) {
		cf, err := v1.ParseConfigFile(bytes.NewReader(config))
		if err != nil {
			return // the pull fails on it, with the library's error
		}
		if dir, err := workingDir(cf.Config.WorkingDir); err == nil {
			if !path.IsAbs(dir) || path.Clean(dir) != dir || strings.ContainsRune(dir, 0) || slices.Contains(strings.Split(dir, "/"), "..") {
				t.Fatalf("working directory %q from %q", dir, cf.Config.WorkingDir)
			}
		}
		env := mergeEnv(cf.Config.Env, map[string]string{"CORRAL_FUZZ": "user"}, "CORRAL_EXTRA=1")
		seen := map[string]bool{}
		for _, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			if seen[k] {
				t.Fatalf("variable %q twice in %q", k, env)
			}
			seen[k] = true
		}
		if !seen["PATH"] || !slices.Contains(env, "CORRAL_FUZZ=user") || !slices.Contains(env, "CORRAL_EXTRA=1") {
			t.Fatalf("env %q lacks PATH or what corral and the user set", env)
		}
		if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), passwd, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "etc", "group"), group, 0o644); err != nil {
			t.Fatal(err)
		}
		rootDir, err := os.Open(root)
		if err != nil {
			t.Fatal(err)
		}
		defer rootDir.Close()
		uid, _, err := resolveUser(rootDir, cf.Config.User)
		if err != nil {
			return
		}
		name, _, _ := strings.Cut(cf.Config.User, ":")
		if n, perr := strconv.ParseUint(name, 10, 32); perr == nil && !bytes.Contains(passwd, []byte(name)) && uint64(uid) != n {
			t.Fatalf("numeric user %q resolved to %d", name, uid)
		}
	})
}
