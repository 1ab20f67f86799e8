// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command corral-go-eval evaluates Go code for the code-interpreter
// image's Go kernel (corral_kernels.py): one interpreter (yaegi) for its
// life, so declarations and variables persist between executions. It
// reads requests, one JSON object a line, {"code": "..."}, and answers
// with lines {"stream": "stdout"|"stderr", "text": "..."} as the code
// prints, then {"done": true, "result"?: "...", "error"?: {"name",
// "value"}}.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"reflect"
	"strings"
	"sync"

	"github.com/traefik/yaegi/interp"
	"github.com/traefik/yaegi/stdlib"
)

// out writes the protocol's lines; the interpreted code's goroutines
// print through it too.
type out struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (o *out) send(v any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_ = o.enc.Encode(v)
}

// stream is the writer the interpreter's os.Stdout or os.Stderr is.
type stream struct {
	o    *out
	name string
}

func (s stream) Write(p []byte) (int, error) {
	s.o.send(map[string]string{"stream": s.name, "text": string(p)})
	return len(p), nil
}

func main() {
	o := &out{enc: json.NewEncoder(os.Stdout)}
	i := interp.New(interp.Options{Stdout: stream{o, "stdout"}, Stderr: stream{o, "stderr"}, GoPath: os.Getenv("GOPATH")})
	if err := i.Use(stdlib.Symbols); err != nil {
		fmt.Fprintln(os.Stderr, "corral-go-eval:", err)
		os.Exit(1)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		var req struct {
			Code string `json:"code"`
		}
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			o.send(map[string]any{"done": true, "error": map[string]string{"name": "ProtocolError", "value": err.Error()}})
			continue
		}
		o.send(eval(i, req.Code))
	}
}

// eval runs code and says how it ended; a panic in it is its error.
func eval(i *interp.Interpreter, code string) (res map[string]any) {
	res = map[string]any{"done": true}
	defer func() {
		if p := recover(); p != nil {
			res["error"] = map[string]string{"name": "panic", "value": fmt.Sprint(p)}
		}
	}()
	// Cell by top-level statement: yaegi takes declarations or
	// statements, not both in one source.
	var v reflect.Value
	var err error
	chunks := split(code)
	for _, c := range chunks {
		if v, err = i.Eval(c); err != nil {
			break
		}
	}
	if len(chunks) > 0 {
		code = chunks[len(chunks)-1]
	}
	if err != nil {
		name := "Error"
		if strings.Contains(err.Error(), "panic") {
			name = "panic"
		}
		res["error"] = map[string]string{"name": name, "value": err.Error()}
		return res
	}
	if s, ok := show(v); ok && endsInExpression(code) {
		res["result"] = s
	}
	return res
}

// split cuts code at the ends of its top-level statements and
// declarations (newlines or semicolons outside brackets).
func split(code string) []string {
	var s scanner.Scanner
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(code))
	s.Init(file, []byte(code), nil, 0)
	var out []string
	depth, start := 0, 0
	for {
		pos, tok, lit := s.Scan()
		off := file.Offset(pos)
		switch tok {
		case token.LPAREN, token.LBRACK, token.LBRACE:
			depth++
		case token.RPAREN, token.RBRACK, token.RBRACE:
			depth--
		case token.SEMICOLON:
			if depth == 0 {
				end := off
				if lit == ";" {
					end++
				}
				if c := strings.TrimSpace(code[start:min(end, len(code))]); c != "" && c != ";" {
					out = append(out, c)
				}
				start = min(end, len(code))
			}
		case token.EOF:
			if c := strings.TrimSpace(code[start:]); c != "" {
				out = append(out, c)
			}
			return out
		}
	}
}

// quiet are calls whose results are not worth showing (a byte count and
// an error that is nil, or nothing).
var quiet = map[string]bool{"fmt": true, "log": true, "print": true, "println": true}

// endsInExpression reports whether code's last statement is an
// expression whose value is the execution's result, as a notebook shows
// it: not an assignment, a declaration or an import, nor a print.
func endsInExpression(code string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc _() {\n"+code+"\n}", 0)
	if err != nil || len(f.Decls) != 1 {
		return false
	}
	body := f.Decls[0].(*ast.FuncDecl).Body.List
	if len(body) == 0 {
		return false
	}
	e, ok := body[len(body)-1].(*ast.ExprStmt)
	if !ok {
		return false
	}
	if call, ok := e.X.(*ast.CallExpr); ok {
		switch fn := call.Fun.(type) {
		case *ast.Ident:
			return !quiet[fn.Name]
		case *ast.SelectorExpr:
			if pkg, ok := fn.X.(*ast.Ident); ok && quiet[pkg.Name] {
				return false
			}
		}
	}
	return true
}

// show is a value's text when an execution ends in an expression worth
// showing (not a function, a type or nothing).
func show(v reflect.Value) (string, bool) {
	if !v.IsValid() || !v.CanInterface() {
		return "", false
	}
	switch v.Kind() {
	case reflect.Func:
		return "", false
	}
	return fmt.Sprintf("%v", v.Interface()), true
}
