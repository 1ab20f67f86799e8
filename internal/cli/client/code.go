// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/corral-dev/corral/sdk"
)

// imageTypes are the result types `corral code` saves to files, with
// their extensions.
var imageTypes = []struct{ mime, ext string }{
	{"image/png", ".png"}, {"image/jpeg", ".jpg"}, {"image/gif", ".gif"}, {"image/svg+xml", ".svg"},
}

// runCode is `corral code`: code run in a sandbox's code interpreter,
// its output streamed, text results printed, images saved.
func runCode(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "code", "code [flags] ID [FILE|-]")
	var cf clientFlags
	cf.register(fs, "text")
	lang := fs.String("lang", "python", "language of the code (the language's default context)")
	cctx := fs.String("context", "", "run in this code context (see the execd API's /code/context) instead of the language's default")
	inline := fs.String("c", "", "the code itself, instead of FILE or standard input")
	outDir := fs.String("out-dir", ".", "directory image results are saved to")
	inv, ok, code := cf.setup(ctx, e, fs, args, 2, false, exitCLIError, func(pos, tail []string) string {
		if len(pos) == 0 || len(tail) > 0 {
			return "code: give a sandbox id and then a file, - for standard input, or -c CODE, such as: corral code ID script.py"
		}
		if len(pos) == 2 && *inline != "" {
			return "code: give either FILE or -c CODE, not both"
		}
		return ""
	})
	if !ok {
		return code
	}
	src := *inline
	if src == "" {
		r := e.Stdin
		if len(inv.pos) == 2 && inv.pos[1] != "-" {
			f, err := os.Open(inv.pos[1])
			if err != nil {
				return fail(e, "code: %v", err)
			}
			defer f.Close()
			r = f
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return fail(e, "code: read the code: %v", err)
		}
		src = string(b)
	}
	if strings.TrimSpace(src) == "" {
		return fail(e, "code: no code to run")
	}
	sb, err := sandbox(ctx, inv.c, inv.pos[0])
	if err != nil {
		return cf.fail(e, err, exitCLIError)
	}
	saved := 0
	h := &sdk.CodeHandlers{
		Stdout: func(t string) error { _, err := io.WriteString(e.Stdout, t); return err },
		Stderr: func(t string) error { _, err := io.WriteString(e.Stderr, t); return err },
		Result: func(r sdk.CodeResult) error {
			for _, f := range r.Files {
				fmt.Fprintf(e.Stderr, "corral: a %s result of %d bytes is in the sandbox at %s\n", f.MIME, f.Size, f.Path)
			}
			for _, it := range imageTypes {
				v, ok := r.Data[it.mime]
				if !ok {
					continue
				}
				b := []byte(v)
				if it.mime != "image/svg+xml" {
					if b, ok = r.Image(it.mime); !ok {
						continue
					}
				}
				saved++
				path := filepath.Join(*outDir, fmt.Sprintf("result-%d%s", saved, it.ext))
				if err := os.WriteFile(path, b, 0o644); err != nil {
					return err
				}
				fmt.Fprintf(e.Stderr, "corral: saved a %s result to %s\n", it.mime, path)
				return nil
			}
			if t := r.Text(); t != "" {
				_, err := fmt.Fprintln(e.Stdout, t)
				return err
			}
			return nil
		},
	}
	x, err := sb.RunCode(ctx, src, sdk.CodeOptions{Context: *cctx, Language: *lang}, h)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(e.Stderr, "corral: interrupted; the code was interrupted")
			return 130
		}
		return cf.fail(e, err, exitCLIError)
	}
	if x.Error != nil {
		tb := x.Error.TracebackText
		if tb == "" {
			tb = strings.Join(x.Error.Traceback, "\n")
		}
		if tb == "" {
			tb = x.Error.EName + ": " + x.Error.EValue
		}
		fmt.Fprintln(e.Stderr, tb)
		return 1
	}
	return 0
}
