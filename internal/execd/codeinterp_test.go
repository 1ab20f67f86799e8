// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package execd_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/corral-dev/corral/api"
)

// TestE2BCodeInterpreter speaks E2B's code-interpreter protocol to a real
// Python kernel: one JSON object per line, results marked main or not,
// errors as lines (not statuses), contexts of their own, and clear 4xx in
// {code, message} for bad requests.
func TestE2BCodeInterpreter(t *testing.T) {
	t.Parallel()
	requirePythonKernel(t)
	d := startExecd(t)
	do := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, d.url+api.PathExecdE2BCode+path, strings.NewReader(body))
		req.Header.Set(api.HeaderExecdToken, token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	lines := func(b []byte) []map[string]any {
		t.Helper()
		var out []map[string]any
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("a line that is not JSON: %q", sc.Text())
			}
			out = append(out, m)
		}
		return out
	}
	st, b := do("POST", "/execute", `{"code":"x = 20\nprint('side')\nx * 2"}`)
	ls := lines(b)
	if st != 200 || len(ls) < 4 {
		t.Fatalf("execute = %d %s", st, b)
	}
	var stdout, main string
	for _, l := range ls {
		switch l["type"] {
		case "stdout":
			stdout += l["text"].(string)
		case "result":
			if l["is_main_result"] == true {
				main = l["text"].(string)
			}
		}
	}
	if stdout != "side\n" || main != "40" || ls[len(ls)-1]["type"] != "end_of_execution" {
		t.Fatalf("lines = %s", b)
	}
	// State is kept; an error is a line.
	_, b = do("POST", "/execute", `{"code":"x / 0"}`)
	var errLine map[string]any
	for _, l := range lines(b) {
		if l["type"] == "error" {
			errLine = l
		}
	}
	if errLine == nil || errLine["name"] != "ZeroDivisionError" || !strings.Contains(errLine["traceback"].(string), "ZeroDivisionError") {
		t.Fatalf("error line: %s", b)
	}
	// A context of its own.
	st, b = do("POST", "/contexts", `{"language":"python"}`)
	var ctx struct{ ID, Language, Cwd string }
	if st != 200 || json.Unmarshal(b, &ctx) != nil || ctx.ID == "" || ctx.Language != "python" || ctx.Cwd == "" {
		t.Fatalf("create context = %d %s", st, b)
	}
	_, b = do("POST", "/execute", `{"code":"x","context_id":"`+ctx.ID+`"}`)
	if !strings.Contains(string(b), `"name":"NameError"`) {
		t.Fatalf("a new context sees the default's state: %s", b)
	}
	if st, b = do("GET", "/contexts", ""); st != 200 || !strings.Contains(string(b), ctx.ID) {
		t.Fatalf("list contexts = %d %s", st, b)
	}
	if st, _ = do("POST", "/contexts/"+ctx.ID+"/restart", ""); st != 204 {
		t.Fatalf("restart = %d", st)
	}
	if st, _ = do("DELETE", "/contexts/"+ctx.ID, ""); st != 204 {
		t.Fatalf("delete = %d", st)
	}
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/execute", `{"code":"1","context_id":"x","language":"python"}`, 400},
		{"POST", "/execute", `{"code":"1","context_id":"no-such"}`, 404},
		{"POST", "/execute", `{"code":"1","env_vars":{"A":"b"}}`, 400},
		{"POST", "/execute", `{"code":`, 400},
		{"POST", "/execute", `{"code":"1","language":"cobol"}`, 400},
		{"DELETE", "/contexts/no-such", "", 404},
		{"POST", "/contexts", `{"language":"cobol"}`, 400},
		{"GET", "/nowhere", "", 404},
	} {
		st, b := do(c.method, c.path, c.body)
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if st != c.status || json.Unmarshal(b, &e) != nil || e.Code != c.status || e.Message == "" {
			t.Errorf("%s %s %s = %d %s", c.method, c.path, c.body, st, b)
		}
	}
}
