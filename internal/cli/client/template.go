// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
)

var templateCommand = Command{
	Name: "template", Summary: "named create presets: corral create --template NAME",
	Subs: []Subcommand{
		{Name: "create", Usage: "create NAME --spec FILE|- [--allow FIELD,...] [--warm-pool N] [--description TEXT] [--public] [--replace]",
			Summary: "store a template: a create body (image, entrypoint, env, resourceLimits, ...) in FILE", Run: runTemplateCreate},
		{Name: "ls", Aliases: []string{"list"}, Usage: "ls", Summary: "your templates, then the public ones", Run: runTemplateList},
		{Name: "get", Usage: "get NAME", Summary: "a template, as JSON", Run: runTemplateGet},
		{Name: "rm", Usage: "rm NAME... [--public]", Summary: "delete templates (--public: the public ones, with an admin key)", Run: runTemplateRemove},
	},
	Note: "A create from a template may set only the fields it allows (--allow; default env and metadata).",
}

func runTemplateCreate(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "template create", "template create NAME --spec FILE|- [flags]")
	cf.register(fs)
	specPath := fs.String("spec", "", "a file holding the create body the template stands for (- reads stdin; required)")
	allow := fs.String("allow", "", "fields a create may override, comma-separated (default env,metadata)")
	desc := fs.String("description", "", "a note to recognise it by")
	public := fs.Bool("public", false, "every tenant may use it (admin key)")
	replace := fs.Bool("replace", false, "replace a template of that name")
	warm := fs.Int("warm-pool", 0, "keep this many sandboxes of it started ahead of time (0 to 32)")
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, 1, nArgs(1, "template create: give the template's name"))
	if !ok {
		return code
	}
	if *specPath == "" {
		return fail(e, "template create: --spec is required")
	}
	var spec []byte
	var err error
	if *specPath == "-" {
		spec, err = io.ReadAll(io.LimitReader(e.Stdin, 1<<20))
	} else {
		spec, err = os.ReadFile(*specPath)
	}
	if err != nil {
		return fail(e, "template create: %v", err)
	}
	if !json.Valid(spec) {
		return fail(e, "template create: %s is not JSON", *specPath)
	}
	t := api.Template{Name: inv.pos[0], Description: *desc, Public: *public, Spec: spec, WarmPool: *warm}
	if *allow != "" {
		for _, f := range strings.Split(*allow, ",") {
			if f = strings.TrimSpace(f); f != "" {
				t.AllowOverride = append(t.AllowOverride, f)
			}
		}
	}
	var out *api.Template
	if *replace {
		out, err = inv.c.PutTemplate(ctx, t)
	} else {
		out, err = inv.c.CreateTemplate(ctx, t)
	}
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "table" {
		_ = printValue(e.Stdout, cf.output, out)
		return 0
	}
	fmt.Fprintln(e.Stdout, out.Name)
	return 0
}

func runTemplateList(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "template ls", "template ls")
	cf.register(fs)
	if ok, code := parseNoArgs(fs, e, args, "template ls"); !ok {
		return code
	}
	c, err := cf.client(e)
	if err != nil {
		return cf.fail(e, err, 1)
	}
	items, err := c.ListTemplates(ctx)
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "table" {
		_ = printValue(e.Stdout, cf.output, items)
		return 0
	}
	now := time.Now()
	t := newTable(e.Stdout, "NAME", "IMAGE", "OVERRIDES", "WARM", "PUBLIC", "AGE", "DESCRIPTION")
	for _, tp := range items {
		var spec struct {
			Image *api.ImageSpec `json:"image"`
		}
		_ = json.Unmarshal(tp.Spec, &spec)
		img := "-"
		if spec.Image != nil {
			img = spec.Image.URI
		}
		pub := ""
		if tp.Public {
			pub = "yes"
		}
		warm := "-"
		if tp.WarmPool > 0 {
			warm = fmt.Sprintf("%d/%d", tp.WarmReady, tp.WarmPool)
		}
		t.row(tp.Name, img, strings.Join(tp.AllowOverride, ","), warm, pub, age(tp.CreatedAt, now), tp.Description)
	}
	t.flush()
	return 0
}

func runTemplateGet(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "template get", "template get NAME")
	cf.register(fs)
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, 1, nArgs(1, "template get: give a template's name"))
	if !ok {
		return code
	}
	t, err := inv.c.GetTemplate(ctx, inv.pos[0])
	if err != nil {
		return cf.apiFail(e, err)
	}
	format := cf.output
	if format == "table" {
		format = "json"
	}
	_ = printValue(e.Stdout, format, t)
	return 0
}

func runTemplateRemove(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "template rm", "template rm NAME... [--public]")
	cf.register(fs)
	public := fs.Bool("public", false, "delete the public templates of these names (admin key)")
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, 1, someArgs("template rm: give at least one template name"))
	if !ok {
		return code
	}
	status := 0
	for _, n := range inv.pos {
		if err := inv.c.DeleteTemplate(ctx, n, *public); err != nil {
			status = cf.apiFail(e, err)
			continue
		}
		fmt.Fprintln(e.Stdout, n)
	}
	return status
}
