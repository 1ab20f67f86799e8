// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !kube && linux

package cli

import (
	"strings"
	"testing"
)

// A build without Kubernetes says so, and how to get one, wherever the
// kubernetes runtime is asked for, before it touches the data dir; the
// flag checks that need no cluster still come first.
func TestBuildWithoutKubeExplainsItself(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--runtime", "kubernetes", "--data-dir", dir}, "built without Kubernetes support"},
		{[]string{"controller", "--corral-image", "x"}, "built without Kubernetes support"},
		{[]string{"serve", "--runtime", "kubernetes", "--data-dir", dir, "--kube-records", "etcd"}, "--kube-records"},
		{[]string{"serve", "--runtime", "kubernetes", "--data-dir", dir, "--default-pids", "10"}, "--default-pids"},
		{[]string{"serve", "--runtime", "warp-drive", "--data-dir", dir}, "unknown runtime"},
	} {
		code, stderr := run(t, nil, tc.args...)
		if code == 0 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "-tags kube") && tc.want == "built without Kubernetes support" {
			t.Errorf("corral %s = %d %q, want a failure saying %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
	if _, out := run(t, nil, "serve", "--help"); !strings.Contains(out, "-kube-namespace") || !strings.Contains(out, "-oci-runtime") {
		t.Errorf("serve --help does not list every runtime's flags: %s", out)
	}
}
