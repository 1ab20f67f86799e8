// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package jupyter

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Spec is a kernelspec: how to start a kernel for a language.
type Spec struct {
	// Name is the kernelspec's directory name (python3, ir, java, ...).
	Name string `json:"-"`
	// Dir is the kernelspec's resource directory.
	Dir           string            `json:"-"`
	Argv          []string          `json:"argv"`
	DisplayName   string            `json:"display_name"`
	Language      string            `json:"language"`
	InterruptMode string            `json:"interrupt_mode,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
}

// InterruptByMessage tells whether the kernel wants interrupt_request on
// the control channel instead of SIGINT.
func (s Spec) InterruptByMessage() bool { return s.InterruptMode == "message" }

// DataDirs returns the Jupyter data directories to search, most
// precedent first, for a process with environment env: $JUPYTER_PATH,
// the user's data dir ($JUPYTER_DATA_DIR, or ~/.local/share/jupyter), the
// share/jupyter of every PATH entry's prefix (where `--sys-prefix`
// installs of a Python on PATH land), then /usr/local/share/jupyter and
// /usr/share/jupyter.
func DataDirs(env []string) []string {
	get := func(name string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
				return v
			}
		}
		return ""
	}
	var dirs []string
	add := func(d string) {
		if d == "" || !filepath.IsAbs(d) {
			return
		}
		d = filepath.Clean(d)
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, d := range filepath.SplitList(get("JUPYTER_PATH")) {
		add(d)
	}
	if d := get("JUPYTER_DATA_DIR"); d != "" {
		add(d)
	} else if home := get("HOME"); home != "" {
		add(filepath.Join(home, ".local", "share", "jupyter"))
	}
	for _, d := range filepath.SplitList(get("PATH")) {
		if filepath.IsAbs(d) {
			add(filepath.Join(filepath.Dir(filepath.Clean(d)), "share", "jupyter"))
		}
	}
	add("/usr/local/share/jupyter")
	add("/usr/share/jupyter")
	return dirs
}

// maxSpecSize bounds the kernel.json read.
const maxSpecSize = 1 << 20

// FindSpecs reads DIR/kernels/NAME/kernel.json in each data dir; the
// first dir holding a name wins, as in Jupyter. Unreadable or invalid
// specs are left out. The result is sorted by name.
func FindSpecs(dirs []string) []Spec {
	seen := map[string]bool{}
	var out []Spec
	for _, d := range dirs {
		entries, err := os.ReadDir(filepath.Join(d, "kernels"))
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if seen[name] || strings.HasPrefix(name, ".") {
				continue
			}
			dir := filepath.Join(d, "kernels", name)
			s, ok := readSpec(filepath.Join(dir, "kernel.json"))
			if !ok {
				continue
			}
			s.Name, s.Dir = name, dir
			seen[name] = true
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Spec) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func readSpec(path string) (Spec, bool) {
	f, err := os.Open(path)
	if err != nil {
		return Spec{}, false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return Spec{}, false
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSpecSize+1))
	if err != nil || len(b) > maxSpecSize {
		return Spec{}, false
	}
	var s Spec
	if json.Unmarshal(b, &s) != nil || len(s.Argv) == 0 || s.Language == "" {
		return Spec{}, false
	}
	return s, true
}

// Pick returns the spec for a language (case-insensitive): one named
// after the language first (a `python` spec over Debian's `python3`, as
// OpenSandbox prefers), else the first by name.
func Pick(specs []Spec, language string) (Spec, bool) {
	var found []Spec
	for _, s := range specs {
		if strings.EqualFold(s.Language, language) {
			found = append(found, s)
		}
	}
	if len(found) == 0 {
		return Spec{}, false
	}
	for _, s := range found {
		if strings.EqualFold(s.Name, language) {
			return s, true
		}
	}
	return found[0], true
}

// Languages lists the languages specs serve, lower-cased and sorted.
func Languages(specs []Spec) []string {
	var out []string
	for _, s := range specs {
		l := strings.ToLower(s.Language)
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}
