// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package files

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
)

// maxSearchResults bounds one search's answer.
const maxSearchResults = 100000

// Match reports whether name matches a glob pattern: '*' matches any run of
// characters except '/', '?' one character except '/', "[...]" a class
// ("[!...]" or "[^...]" negated, with ranges), "{a,b}" alternatives, and a
// path segment that is exactly "**" any number of segments, none included.
func Match(pattern, name string) bool {
	for _, alt := range expandBraces(pattern, 0) {
		if matchSegments(strings.Split(alt, "/"), strings.Split(name, "/")) {
			return true
		}
	}
	return false
}

// expandBraces turns "a{b,c}d" into ["abd", "acd"]; depth bounds nesting.
func expandBraces(p string, depth int) []string {
	open := strings.IndexByte(p, '{')
	if open < 0 || depth > 8 {
		return []string{p}
	}
	level, end := 0, -1
	var commas []int
	for i := open; i < len(p) && end < 0; i++ {
		switch p[i] {
		case '{':
			level++
		case '}':
			level--
			if level == 0 {
				end = i
			}
		case ',':
			if level == 1 {
				commas = append(commas, i)
			}
		}
	}
	if end < 0 {
		return []string{p}
	}
	var out []string
	start := open + 1
	for _, c := range append(commas, end) {
		for _, tail := range expandBraces(p[end+1:], depth+1) {
			for _, mid := range expandBraces(p[start:c], depth+1) {
				if len(out) < 1024 {
					out = append(out, p[:open]+mid+tail)
				}
			}
		}
		start = c + 1
	}
	return out
}

func matchSegments(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			pat = pat[1:]
			if len(pat) == 0 {
				return true
			}
			for i := 0; i <= len(name); i++ {
				if matchSegments(pat, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 || !matchSegment(pat[0], name[0]) {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// matchSegment matches one path segment, iteratively with backtracking on
// the last '*', so it runs in linear time on hostile input.
func matchSegment(pat, s string) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(pat) {
			switch pat[pi] {
			case '*':
				starP, starS = pi, si
				pi++
				continue
			case '?':
				pi++
				si++
				continue
			case '[':
				if ok, width, valid := matchClass(pat[pi:], s[si]); valid {
					if ok {
						pi += width
						si++
						continue
					}
				} else if s[si] == '[' {
					pi++
					si++
					continue
				}
			case '\\':
				if pi+1 < len(pat) && pat[pi+1] == s[si] {
					pi += 2
					si++
					continue
				}
			default:
				if pat[pi] == s[si] {
					pi++
					si++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		pi, si = starP+1, starS
	}
	for pi < len(pat) && pat[pi] == '*' {
		pi++
	}
	return pi == len(pat)
}

// matchClass matches c against the class at the start of p ("[...]").
// valid is false when p has no closing ']'.
func matchClass(p string, c byte) (ok bool, width int, valid bool) {
	i := 1
	negate := i < len(p) && (p[i] == '!' || p[i] == '^')
	if negate {
		i++
	}
	first := true
	for i < len(p) {
		if p[i] == ']' && !first {
			return ok != negate, i + 1, true
		}
		first = false
		lo := p[i]
		hi := lo
		if i+2 < len(p) && p[i+1] == '-' && p[i+2] != ']' {
			hi = p[i+2]
			i += 2
		}
		if lo <= c && c <= hi {
			ok = true
		}
		i++
	}
	return false, 0, false
}

// Search returns the files below dir whose name matches pattern (default
// "**"). A pattern with a '/' is matched against the path relative to dir;
// one without is matched against the file's name. Only regular files are
// reported; directories are walked, symbolic links are neither followed nor
// reported.
func Search(dir, pattern string) ([]api.FileInfo, error) {
	abs, err := Resolve(dir)
	if err != nil {
		return nil, err
	}
	if pattern == "" {
		pattern = "**"
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, FSError(dir, err)
	}
	if !fi.IsDir() {
		return nil, errdefs.Newf(errdefs.ErrInvalidArgument, api.CodeExecdInvalidPath, "%s is not a directory", dir)
	}
	byPath := strings.Contains(pattern, "/")
	out := []api.FileInfo{}
	n := newNames()
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable parts are skipped, not fatal
		}
		if !d.Type().IsRegular() {
			return nil
		}
		subject := d.Name()
		if byPath {
			subject, _ = filepath.Rel(abs, p)
		}
		if !Match(pattern, subject) {
			return nil
		}
		efi, err := d.Info()
		if err != nil {
			return nil
		}
		out = append(out, info(p, efi, n))
		if len(out) >= maxSearchResults {
			return fs.SkipAll
		}
		return nil
	})
	return out, err
}
