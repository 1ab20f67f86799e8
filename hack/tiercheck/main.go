// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Command tiercheck reads `go test -json` output on stdin, passes it through
// to stdout as plain test output, and fails if the run failed or if any
// test named on the command line (package.Test, e.g.
// internal/driver/oci.TestConformance) did not run and pass. CI uses it so
// that an integration tier that silently skipped is a failure, not a pass.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func main() {
	want := map[string]string{}
	for _, a := range os.Args[1:] {
		want[a] = "did not run"
	}
	failed := false
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var ev event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			fmt.Println(sc.Text())
			continue
		}
		if ev.Action == "output" {
			fmt.Print(ev.Output)
			continue
		}
		if ev.Action == "fail" {
			failed = true
		}
		if ev.Test == "" {
			continue
		}
		pkg := ev.Package
		if i := strings.Index(pkg, "/corral/"); i >= 0 {
			pkg = pkg[i+len("/corral/"):]
		}
		name := pkg + "." + ev.Test
		if _, ok := want[name]; ok {
			switch ev.Action {
			case "pass":
				want[name] = ""
			case "skip":
				want[name] = "was skipped"
			case "fail":
				want[name] = "failed"
			}
		}
	}
	for name, problem := range want {
		if problem != "" {
			fmt.Fprintf(os.Stderr, "tiercheck: required test %s %s\n", name, problem)
			failed = true
		}
	}
	if failed {
		fmt.Fprintln(os.Stderr, "tiercheck: FAIL")
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "tiercheck: ok (%d required tests passed)\n", len(want))
}
