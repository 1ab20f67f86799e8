// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"errors"
	"path"

	"github.com/corral-dev/corral/internal/cli/client"
	"github.com/corral-dev/corral/internal/egress/nft"
	"github.com/corral-dev/corral/internal/safefile"
)

func isolateOutbound() error { return nft.IsolateOutbound() }

// runCheckMounts is the init container a Kubernetes sandbox pod with
// volumes runs from the sandbox's own image, before the sandbox's
// container: the runtime follows links in a mount path inside the
// image's root, so a claim at /v/.corral with /v -> / would cover
// corral's binary. Each PATH (absolute) must reach its place with no
// symbolic link on the way; the first that does not fails the pod, its
// reason on stderr (the pod's termination message).
func runCheckMounts(_ context.Context, e *env, args []string) int {
	fs := client.NewFlagSet(e, "check-mounts", "check-mounts PATH...")
	if ok, code := client.ParseFlags(fs, e, args); !ok {
		return code
	}
	root, err := safefile.OpenDir("/")
	if err != nil {
		return client.Fail(e, "check-mounts: %v", err)
	}
	defer root.Close()
	for _, p := range fs.Args() {
		if !path.IsAbs(p) || path.Clean(p) != p {
			return client.Fail(e, "check-mounts: %q is not an absolute, clean path", p)
		}
		// The container's own mounts (corral's binary at /.corral among
		// them) are crossed; no claim is mounted here.
		if err := safefile.CheckNoLinksAcrossMounts(root, p); err != nil {
			if errors.Is(err, safefile.ErrLink) {
				return client.Fail(e, "mountPath %s passes through a symbolic link in the image; mount it at a path without links", p)
			}
			return client.Fail(e, "mountPath %s cannot be used in the image: %v", p, err)
		}
	}
	return 0
}
