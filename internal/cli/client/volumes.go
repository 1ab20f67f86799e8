// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"fmt"
	"strings"
	"time"
)

var volumeCommand = Command{
	Name: "volume", Summary: "list and delete named volumes",
	Subs: []Subcommand{
		{Name: "ls", Aliases: []string{"list"}, Usage: "ls", Summary: "list your named volumes and the sandboxes that mount them", Run: runVolumeList},
		{Name: "rm", Usage: "rm NAME...", Summary: "delete named volumes and their files", Run: runVolumeRemove},
	},
	Note: "A create mounts one with a pvc volume ('volumes':[{'name':'data','pvc':{'claimName':'NAME'},'mountPath':'/data'}]);\nit is made on first use and is yours alone.",
}

func runVolumeList(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "volume ls", "volume ls")
	cf.register(fs)
	if ok, code := parseNoArgs(fs, e, args, "volume ls"); !ok {
		return code
	}
	c, err := cf.client(e)
	if err != nil {
		return cf.fail(e, err, 1)
	}
	items, err := c.ListVolumes(ctx)
	if err != nil {
		return cf.apiFail(e, err)
	}
	if cf.output != "table" {
		_ = printValue(e.Stdout, cf.output, items)
		return 0
	}
	now := time.Now()
	t := newTable(e.Stdout, "NAME", "AGE", "MOUNTED BY")
	for _, v := range items {
		t.row(v.Name, age(v.CreatedAt, now), strings.Join(v.InUseBy, ","))
	}
	t.flush()
	return 0
}

func runVolumeRemove(ctx context.Context, e *env, args []string) int {
	var cf clientFlags
	fs := newFlagSet(e, "volume rm", "volume rm NAME...")
	cf.register(fs)
	inv, ok, code := cf.setup(ctx, e, fs, args, -1, false, 1, someArgs("volume rm: give at least one volume name"))
	if !ok {
		return code
	}
	status := 0
	for _, name := range inv.pos {
		if err := inv.c.DeleteVolume(ctx, name); err != nil {
			status = cf.apiFail(e, err)
			continue
		}
		fmt.Fprintln(e.Stdout, name)
	}
	return status
}
