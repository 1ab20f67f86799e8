// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/corral-dev/corral/internal/testutil"
)

// codeLike is the shape of a namespaced error code.
var codeLike = regexp.MustCompile(`^[A-Z][A-Z0-9_]*::[A-Z0-9_]+$`)

// TestErrorCodesAreAClosedSet: every error code a response can carry is a
// constant in package api (errhttp keeps the one generic code per kind).
// Outside those, a string literal shaped like AREA::NAME, or a literal
// as the code of errdefs.New, Newf, Wrap or Invalid, is refused ("" is
// no code: the kind's generic one).
func TestErrorCodesAreAClosedSet(t *testing.T) {
	root := testutil.ModuleRoot(t)
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case ".git", "api", "errdefs/errhttp", "node_modules":
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					if s, err := strconv.Unquote(n.Value); err == nil && codeLike.MatchString(s) {
						t.Errorf("%s: the error code %q is a literal; make it a constant in package api", fset.Position(n.Pos()), s)
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "errdefs" {
					return true
				}
				arg := -1
				switch sel.Sel.Name {
				case "New", "Newf", "Wrap":
					arg = 1
				case "Invalid":
					arg = 0
				}
				if arg >= 0 && arg < len(n.Args) {
					if lit, ok := n.Args[arg].(*ast.BasicLit); ok && lit.Kind == token.STRING && lit.Value != `""` {
						t.Errorf("%s: errdefs.%s with the code %s as a literal; use a constant of package api", fset.Position(lit.Pos()), sel.Sel.Name, lit.Value)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
