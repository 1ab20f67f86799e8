// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/BurntSushi/toml"

	"github.com/corral-dev/corral/sdk"
)

// profile is a saved connection: a server and a key.
type profile struct {
	Server string `toml:"server"`
	APIKey string `toml:"api_key,omitempty"`
}

// profiles is the client configuration file.
type profiles struct {
	Current  string             `toml:"current,omitempty"`
	Profiles map[string]profile `toml:"profiles"`
}

// profilesPath is $CORRAL_CONFIG, else corral/config.toml in the user's
// configuration directory ($XDG_CONFIG_HOME, else ~/.config).
func profilesPath(e *env) (string, error) {
	if p := e.Getenv("CORRAL_CONFIG"); p != "" {
		return p, nil
	}
	dir := e.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := e.Getenv("HOME")
		if home == "" {
			return "", errors.New("cannot find the configuration directory: set HOME, XDG_CONFIG_HOME or CORRAL_CONFIG")
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "corral", "config.toml"), nil
}

func readProfiles(e *env) (*profiles, string, error) {
	path, err := profilesPath(e)
	if err != nil {
		return nil, "", err
	}
	ps := &profiles{Profiles: map[string]profile{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ps, path, nil
	}
	if err != nil {
		return nil, path, err
	}
	md, err := toml.Decode(string(b), ps)
	if err != nil {
		return nil, path, fmt.Errorf("%s: %w", path, err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		return nil, path, fmt.Errorf("%s: unknown key %s", path, un[0])
	}
	if ps.Profiles == nil {
		ps.Profiles = map[string]profile{}
	}
	return ps, path, nil
}

// write saves the file atomically, readable by its owner only (it holds keys).
func (ps *profiles) write(path string) error {
	var buf bytes.Buffer
	buf.WriteString("# corral client profiles; edit with 'corral config set|use|rm'.\n")
	if err := toml.NewEncoder(&buf).Encode(ps); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// loadProfile returns the named profile, or $CORRAL_PROFILE's, or the
// current one; no file and no name is an empty profile.
func loadProfile(e *env, name string) (profile, error) {
	if name == "" {
		name = e.Getenv("CORRAL_PROFILE")
	}
	ps, path, err := readProfiles(e)
	if err != nil {
		return profile{}, err
	}
	if name == "" {
		name = ps.Current
		if name == "" {
			return profile{}, nil
		}
	}
	p, ok := ps.Profiles[name]
	if !ok {
		return profile{}, fmt.Errorf("no profile %q in %s (see 'corral config ls')", name, path)
	}
	return p, nil
}

var configCommand = Command{
	Name: "config", Summary: "manage connection profiles; write a server configuration",
	Subs: []Subcommand{
		{Name: "set", Usage: "set NAME --server URL [--api-key KEY]", Summary: "save a connection profile (the first becomes current)", Run: runConfigSet},
		{Name: "use", Usage: "use NAME", Summary: "make NAME the current profile", Run: runConfigUse},
		{Name: "ls", Aliases: []string{"list"}, Usage: "ls", Summary: "list profiles", Run: runConfigList},
		{Name: "rm", Usage: "rm NAME", Summary: "delete a profile", Run: runConfigRemove},
		{Name: "init", Usage: "init [PATH]", Summary: "write a commented 'corral serve' configuration", Run: func(_ context.Context, e *env, args []string) int { return configInit(e, args) }},
	},
	Note: `Profiles live in $CORRAL_CONFIG, else ~/.config/corral/config.toml (mode 0600).
Flags and CORRAL_SERVER / CORRAL_API_KEY / OPEN_SANDBOX_* variables override them.`,
}

func runConfigSet(_ context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "config set", "config set NAME --server URL [--api-key KEY]")
	server := fs.String("server", "", "server address, such as http://127.0.0.1:8080 (required)")
	key := fs.String("api-key", "", "API key")
	use := fs.Bool("use", false, "also make it the current profile")
	pos, _, ok, code := parseArgs(fs, e, args, -1)
	if !ok {
		return code
	}
	if len(pos) != 1 || *server == "" {
		return fail(e, "config set: give one profile name and --server")
	}
	if _, err := sdk.New(sdk.WithBaseURL(*server)); err != nil {
		return fail(e, "config set: %v", err)
	}
	ps, path, err := readProfiles(e)
	if err != nil {
		return fail(e, "%v", err)
	}
	ps.Profiles[pos[0]] = profile{Server: *server, APIKey: *key}
	if *use || ps.Current == "" {
		ps.Current = pos[0]
	}
	if err := ps.write(path); err != nil {
		return fail(e, "%v", err)
	}
	fmt.Fprintf(e.Stderr, "saved profile %s in %s\n", pos[0], path)
	return 0
}

func runConfigUse(_ context.Context, e *env, args []string) int {
	return editProfile(e, "use", args, func(ps *profiles, name string) { ps.Current = name })
}

func runConfigRemove(_ context.Context, e *env, args []string) int {
	return editProfile(e, "rm", args, func(ps *profiles, name string) {
		delete(ps.Profiles, name)
		if ps.Current == name {
			ps.Current = ""
		}
	})
}

// editProfile applies edit to the one existing profile args names.
func editProfile(e *env, verb string, args []string, edit func(ps *profiles, name string)) int {
	if len(args) != 1 {
		return fail(e, "config %s: give one profile name", verb)
	}
	ps, path, err := readProfiles(e)
	if err != nil {
		return fail(e, "%v", err)
	}
	if _, ok := ps.Profiles[args[0]]; !ok {
		return fail(e, "no profile %q in %s", args[0], path)
	}
	edit(ps, args[0])
	if err := ps.write(path); err != nil {
		return fail(e, "%v", err)
	}
	return 0
}

func runConfigList(_ context.Context, e *env, _ []string) int {
	ps, _, err := readProfiles(e)
	if err != nil {
		return fail(e, "%v", err)
	}
	names := make([]string, 0, len(ps.Profiles))
	for n := range ps.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	t := newTable(e.Stdout, "CURRENT", "NAME", "SERVER", "API KEY")
	for _, n := range names {
		p := ps.Profiles[n]
		cur, key := "", "-"
		if n == ps.Current {
			cur = "*"
		}
		if len(p.APIKey) > 8 {
			key = p.APIKey[:8] + "…"
		}
		t.row(cur, n, p.Server, key)
	}
	t.flush()
	return 0
}
