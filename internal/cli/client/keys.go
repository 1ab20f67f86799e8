// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/corral-dev/corral/api"
)

var keysCommand = Command{
	Name: "keys", Summary: "create, list and revoke API keys",
	Subs: []Subcommand{
		{Name: "create", Usage: "create --tenant NAME [--name TEXT] [--admin]", Summary: "mint a key (printed once)", Run: runKeysCreate},
		{Name: "ls", Aliases: []string{"list"}, Usage: "ls", Summary: "list keys", Run: runKeysList},
		{Name: "revoke", Usage: "revoke KEY_ID", Summary: "revoke a key at once", Run: runKeysRevoke},
	},
	Note: "These talk to a running server with an admin key.",
}

func runKeysCreate(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "keys create", "keys create --tenant NAME [--name TEXT] [--admin]")
	cf.register(fs)
	tenant := fs.String("tenant", "", "tenant the key acts for (required)")
	name := fs.String("name", "", "a note to recognise the key by")
	admin := fs.Bool("admin", false, "the key may also manage keys and read /metrics")
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if *tenant == "" {
		return fail(e, "keys create: --tenant is required")
	}
	c, err := cf.client(e)
	if err != nil {
		return cf.fail(e, err, 1)
	}
	k, err := c.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Tenant: *tenant, Name: *name, Admin: *admin})
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "table" {
		_ = printValue(e.Stdout, cf.output, k)
		return 0
	}
	fmt.Fprintf(e.Stdout, "%s\n", k.Key)
	fmt.Fprintf(e.Stderr, "created key %s for tenant %s; it is shown only this once\n", k.ID, k.Tenant)
	return 0
}

func runKeysList(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "keys ls", "keys ls")
	cf.register(fs)
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	c, err := cf.client(e)
	if err != nil {
		return cf.fail(e, err, 1)
	}
	keys, err := c.ListAPIKeys(ctx)
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "table" {
		_ = printValue(e.Stdout, cf.output, keys)
		return 0
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTENANT\tPREFIX\tADMIN\tCREATED\tREVOKED\tNAME")
	for _, k := range keys {
		revoked := "-"
		if k.RevokedAt != nil {
			revoked = k.RevokedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s…\t%v\t%s\t%s\t%s\n", k.ID, k.Tenant, k.Prefix, k.Admin, k.CreatedAt.Format(time.RFC3339), revoked, k.Name)
	}
	_ = tw.Flush()
	return 0
}

func runKeysRevoke(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "keys revoke", "keys revoke KEY_ID")
	cf.register(fs)
	if ok, code := parseFlags(fs, e, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return fail(e, "keys revoke: give exactly one key id (see 'corral keys ls')")
	}
	c, err := cf.client(e)
	if err != nil {
		return cf.fail(e, err, 1)
	}
	if err := c.RevokeAPIKey(ctx, fs.Arg(0)); err != nil {
		return cf.apiFail(e, err)
	}
	fmt.Fprintf(e.Stderr, "revoked %s\n", fs.Arg(0))
	return 0
}
