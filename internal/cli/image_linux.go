// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"encoding/json"
	"flag"
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

// imageCommand manages the native runtime's image store on this machine.
// It works on the data directory directly (with a file lock), so it needs
// no running server and a running server sees its changes at once.
func imageCommand() command {
	return command{
		Name: "image", Summary: imageSummary,
		Subs: []client.Subcommand{
			{Name: "import", Usage: "import FILE [--name NAME] [--tenant T]", Summary: "add images from a docker save tarball or an OCI layout (dir or tar)", Run: runImageImport},
			{Name: "pull", Usage: "pull REF [--username U --password P] [--platform P] [--tenant T]", Summary: "pull an image from a registry", Run: runImagePull},
			{Name: "ls", Aliases: []string{"list"}, Usage: "ls [-o json]", Summary: "list images", Run: runImageList},
			{Name: "rm", Usage: "rm REF...", Summary: "remove images, and the layers no other image or sandbox uses", Run: runImageRemove},
			{Name: "gc", Usage: "gc", Summary: "remove layers no image and no sandbox uses", Run: runImageGC},
		},
		Note: `Images you import or pull are for every tenant, unless --tenant makes them one
tenant's. A pull without --username uses this machine's registry logins
(~/.docker/config.json). All take --data-dir (default: the server's).`,
	}
}

// imageCmd is one image subcommand's flags and, once parsed, its store.
type imageCmd struct {
	fs      *flag.FlagSet
	dataDir *string
	store   *imagestore.Store
	root    string // the native runtime's directory
}

func newImageCmd(e *env, sub, usage string) *imageCmd {
	fs := client.NewFlagSet(e, "image "+sub, "image "+usage)
	return &imageCmd{fs: fs, dataDir: fs.String("data-dir", defaultDataDir(e.Getenv), "the server's data directory")}
}

// open parses args (flags may follow the arguments) and opens the store.
func (c *imageCmd) open(e *env, args []string) (ok bool, code int) {
	if ok, code := client.ParseFlags(c.fs, e, reorder(args)); !ok {
		return false, code
	}
	c.root = filepath.Join(*c.dataDir, "oci")
	var err error
	if c.store, err = imagestore.Open(filepath.Join(c.root, "images"), nil); err != nil {
		return false, client.Fail(e, "%v", err)
	}
	return true, 0
}

// imageProgress draws a pull's or an import's progress on a terminal.
func imageProgress(e *env) func(imagestore.Progress) {
	return func(p imagestore.Progress) {
		if client.IsTerminal(e.Stderr) {
			fmt.Fprintf(e.Stderr, "\r%s: %d/%d layers, %.1f MiB written", p.Image, p.LayersDone, p.LayersTotal, float64(p.BytesWritten)/(1<<20))
			if p.LayersDone == p.LayersTotal {
				fmt.Fprintln(e.Stderr)
			}
		}
	}
}

func runImageImport(ctx context.Context, e *env, args []string) int {
	c := newImageCmd(e, "import", "import FILE [--name NAME] [--tenant T]")
	asName := c.fs.String("name", "", "the name to give the image")
	tenant := c.fs.String("tenant", "", "only this tenant may use the image (default: every tenant)")
	if ok, code := c.open(e, args); !ok {
		return code
	}
	if c.fs.NArg() != 1 {
		return client.Fail(e, "image import: give one file or directory")
	}
	imgs, err := c.store.Import(ctx, c.fs.Arg(0), imagestore.ImportOptions{Name: *asName, Tenant: *tenant, Progress: imageProgress(e)})
	if err != nil {
		return client.Fail(e, "%v", err)
	}
	for _, img := range imgs {
		fmt.Fprintln(e.Stdout, img.Name)
	}
	return 0
}

func runImagePull(ctx context.Context, e *env, args []string) int {
	c := newImageCmd(e, "pull", "pull REF [--username U --password P] [--platform os/arch] [--tenant T]")
	user := c.fs.String("username", "", "registry user")
	pass := c.fs.String("password", "", "registry password (or token)")
	platform := c.fs.String("platform", "", "os/arch (default: this machine's)")
	tenant := c.fs.String("tenant", "", "only this tenant may use the image (default: every tenant)")
	if ok, code := c.open(e, args); !ok {
		return code
	}
	if c.fs.NArg() != 1 {
		return client.Fail(e, "image pull: give one image reference")
	}
	img, err := c.store.Pull(ctx, c.fs.Arg(0), imagestore.PullOptions{Tenant: *tenant, Username: *user, Password: *pass,
		Keychain: authn.DefaultKeychain, Platform: *platform, Progress: imageProgress(e)})
	if err != nil {
		return client.Fail(e, "%v", err)
	}
	fmt.Fprintln(e.Stdout, img.Name)
	return 0
}

func runImageList(_ context.Context, e *env, args []string) int {
	c := newImageCmd(e, "ls", "ls [-o json]")
	output := c.fs.String("o", "table", "output format, table or json")
	if ok, code := c.open(e, args); !ok {
		return code
	}
	if *output != "table" && *output != "json" {
		return client.Fail(e, "image ls: -o %q: want table or json", *output)
	}
	imgs, err := c.store.List()
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
	return 0
}

func runImageRemove(_ context.Context, e *env, args []string) int {
	c := newImageCmd(e, "rm", "rm REF...")
	if ok, code := c.open(e, args); !ok {
		return code
	}
	if c.fs.NArg() == 0 {
		return client.Fail(e, "image rm: give at least one image")
	}
	for _, ref := range c.fs.Args() {
		if err := c.store.Remove(ref); err != nil {
			return client.Fail(e, "%v", err)
		}
		fmt.Fprintln(e.Stdout, ref)
	}
	// Layers no other image and no sandbox uses go with the image.
	if _, err := c.store.GC(oci.LayersInUse(c.root)); err != nil {
		return client.Fail(e, "%v", err)
	}
	return 0
}

func runImageGC(_ context.Context, e *env, args []string) int {
	c := newImageCmd(e, "gc", "gc")
	if ok, code := c.open(e, args); !ok {
		return code
	}
	if c.fs.NArg() != 0 {
		return client.Fail(e, "image gc takes no arguments (got %q)", c.fs.Args())
	}
	n, err := c.store.GC(oci.LayersInUse(c.root))
	if err != nil {
		return client.Fail(e, "%v", err)
	}
	fmt.Fprintf(e.Stdout, "removed %d layers\n", n)
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
