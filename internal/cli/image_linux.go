// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/corral-dev/corral/internal/cli/client"
	"github.com/corral-dev/corral/internal/driver/oci"
	"github.com/corral-dev/corral/internal/imagestore"
)

// runImage manages the native runtime's image store on this machine. It
// works on the data directory directly (with a file lock), so it needs no
// running server and a running server sees its changes at once.
func runImage(ctx context.Context, e *env, args []string) int {
	usage := `Usage: corral image <import|pull|ls|rm|gc> [flags]

  corral image import FILE [--name NAME] [--tenant T]   add images from a docker save tarball or an OCI layout (dir or tar)
  corral image pull REF [--username U --password P] [--platform os/arch] [--tenant T]
  corral image ls [-o json]
  corral image rm REF...
  corral image gc                          remove layers no image and no sandbox uses

Images you import or pull are for every tenant, unless --tenant makes them one
tenant's. A pull without --username uses this machine's registry logins
(~/.docker/config.json). All take --data-dir (default: the server's).`
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(e.Stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub := args[0]
	fs := client.NewFlagSet(e, "image "+sub, "image "+sub+" [flags]")
	dataDir := fs.String("data-dir", defaultDataDir(e.Getenv), "the server's data directory")
	asName := fs.String("name", "", "import: the name to give the image")
	user := fs.String("username", "", "pull: registry user")
	pass := fs.String("password", "", "pull: registry password (or token)")
	platform := fs.String("platform", "", "pull: os/arch (default: this machine's)")
	tenant := fs.String("tenant", "", "import, pull: only this tenant may use the image (default: every tenant)")
	output := fs.String("o", "table", "ls: output format, table or json")
	if ok, code := client.ParseFlags(fs, e, reorder(args[1:])); !ok {
		return code
	}
	root := filepath.Join(*dataDir, "oci")
	store, err := imagestore.Open(filepath.Join(root, "images"), nil)
	if err != nil {
		return client.Fail(e, "%v", err)
	}
	progress := func(p imagestore.Progress) {
		if client.IsTerminal(e.Stderr) {
			fmt.Fprintf(e.Stderr, "\r%s: %d/%d layers, %.1f MiB written", p.Image, p.LayersDone, p.LayersTotal, float64(p.BytesWritten)/(1<<20))
			if p.LayersDone == p.LayersTotal {
				fmt.Fprintln(e.Stderr)
			}
		}
	}
	switch sub {
	case "import":
		if fs.NArg() != 1 {
			return client.Fail(e, "image import: give one file or directory")
		}
		imgs, err := store.Import(ctx, fs.Arg(0), imagestore.ImportOptions{Name: *asName, Tenant: *tenant, Progress: progress})
		if err != nil {
			return client.Fail(e, "%v", err)
		}
		for _, img := range imgs {
			fmt.Fprintln(e.Stdout, img.Name)
		}
	case "pull":
		if fs.NArg() != 1 {
			return client.Fail(e, "image pull: give one image reference")
		}
		img, err := store.Pull(ctx, fs.Arg(0), imagestore.PullOptions{Tenant: *tenant, Username: *user, Password: *pass,
			Keychain: authn.DefaultKeychain, Platform: *platform, Progress: progress})
		if err != nil {
			return client.Fail(e, "%v", err)
		}
		fmt.Fprintln(e.Stdout, img.Name)
	case "ls", "list":
		imgs, err := store.List()
		if err != nil {
			return client.Fail(e, "%v", err)
		}
		if *output == "json" {
			b, _ := json.MarshalIndent(imgs, "", "  ")
			fmt.Fprintln(e.Stdout, string(b))
			return 0
		}
		tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tDIGEST\tLAYERS\tSIZE\tADDED\tTENANTS")
		for _, img := range imgs {
			who := "all"
			if !img.Public {
				who = strings.Join(img.Tenants, ",")
			}
			fmt.Fprintf(tw, "%s\t%.19s\t%d\t%.1f MiB\t%s\t%s\n", img.Name, img.Digest, len(img.Layers), float64(img.Size)/(1<<20), img.Added.Format(time.RFC3339), who)
		}
		_ = tw.Flush()
	case "rm":
		if fs.NArg() == 0 {
			return client.Fail(e, "image rm: give at least one image")
		}
		for _, ref := range fs.Args() {
			if err := store.Remove(ref); err != nil {
				return client.Fail(e, "%v", err)
			}
			fmt.Fprintln(e.Stdout, ref)
		}
		// Layers no other image and no sandbox uses go with the image.
		if _, err := store.GC(oci.LayersInUse(root)); err != nil {
			return client.Fail(e, "%v", err)
		}
	case "gc":
		n, err := store.GC(oci.LayersInUse(root))
		if err != nil {
			return client.Fail(e, "%v", err)
		}
		fmt.Fprintf(e.Stdout, "removed %d layers\n", n)
	default:
		return client.Fail(e, "image: unknown subcommand %q (import, pull, ls, rm, gc)", sub)
	}
	return 0
}

// reorder moves flags before positional arguments, so `image import FILE
// --name X` works as people type it.
func reorder(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			if !containsEq(a) && i+1 < len(args) && takesValue(a) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func containsEq(s string) bool {
	for _, c := range s {
		if c == '=' {
			return true
		}
	}
	return false
}

func takesValue(flag string) bool {
	switch flag {
	case "-h", "--help", "-help":
		return false
	}
	return true
}
