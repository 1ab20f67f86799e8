// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package docker

import (
	"strings"
	"testing"
)

func TestImageIDLike(t *testing.T) {
	t.Parallel()
	for ref, want := range map[string]bool{
		"sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": true,
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef":             true,
		"0123456789ab": true, "sha256:0123": true, "sha256:": true,
		"busybox": false, "busybox:1.36": false, "deadbeef": false, "registry.local/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": false,
		"corral-snapshot:abc": false,
	} {
		if got := imageIDLike(ref); got != want {
			t.Errorf("imageIDLike(%q) = %v, want %v", ref, got, want)
		}
	}
}

func TestRunscRuntimeNeedsHostNetwork(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" or a part of the problem
	}{
		{[]string{"--network=host", "--overlay2=none"}, ""},
		{[]string{"--debug", "--overlay2=none", "--host-fifo=open", "--network=host"}, ""},
		{nil, "--network=host"},
		{[]string{"--network=sandbox", "--overlay2=none"}, "--network=host"},
		{[]string{"--network=host"}, "--overlay2=none"},
		{[]string{"--network=host", "--overlay2=root:self"}, "--overlay2=none"},
	} {
		got := runscArgsProblem("runsc", tc.args)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("args %q: %q, want a problem naming %q", tc.args, got, tc.want)
		}
	}
}
