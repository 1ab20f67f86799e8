// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// envName is the environment variable that sets a flag: --max-timeout is
// CORRAL_MAX_TIMEOUT.
func envName(flagName string) string {
	return "CORRAL_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// fileKey is the configuration file key of a flag: --max-timeout is max_timeout.
func fileKey(flagName string) string { return strings.ReplaceAll(flagName, "-", "_") }

// applyLayers fills every flag the command line did not set from the
// environment, then from the TOML file at path (if any). Precedence:
// flags, environment, file, defaults. Unknown file keys are an error.
func applyLayers(fs *flag.FlagSet, e *env, path string, skip ...string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	file := map[string]any{}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read config: %w", err)
		}
		if _, err := toml.Decode(string(b), &file); err != nil {
			return fmt.Errorf("config %s: %w", path, err)
		}
		var unknown []string
		for k := range file {
			if fs.Lookup(strings.ReplaceAll(k, "_", "-")) == nil || contains(skip, strings.ReplaceAll(k, "_", "-")) {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			return fmt.Errorf("config %s: unknown keys %s", path, strings.Join(unknown, ", "))
		}
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] || contains(skip, f.Name) {
			return
		}
		if v := e.Getenv(envName(f.Name)); v != "" {
			if serr := f.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, serr)
			}
			return
		}
		if v, ok := file[fileKey(f.Name)]; ok {
			if serr := f.Value.Set(fmt.Sprint(v)); serr != nil {
				err = fmt.Errorf("config %s: %s = %v: %w", path, fileKey(f.Name), v, serr)
			}
		}
	})
	return err
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
