// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// evidence is one tool call's result as the model saw it: what a figure
// of the report or of the model's summary is checked against.
type evidence struct {
	callID, tool string
	start, end   time.Time
	out          map[string]any
}

// capForModel returns what the model is sent of out, as a value and as
// JSON of at most limit bytes: while it is longer, its longest string is
// cut in the middle (head and tail kept, with a marker saying how much
// went; out is changed in place), and the result says how many bytes were
// cut for the context. It returns the bytes cut (0: sent whole).
func capForModel(out map[string]any, limit int) (map[string]any, string, int) {
	s := toJSON(out)
	if len(s) <= limit {
		return out, s, 0
	}
	cut := 0
	for range 32 {
		over := len(s) - limit + 512 // room for the markers and the note
		if over <= 512 {
			break
		}
		set, str := longestString(out)
		if set == nil || len(str) < 64 {
			break
		}
		// Remove enough of the string's own bytes for its JSON form (in
		// which a control byte takes six) to shrink by over.
		enc := len(toJSON(str)) - 2
		keep := max(len(str)-int(int64(over)*int64(len(str))/int64(enc))-1, 0)
		head, tail := runePrefix(str, keep/2), runeSuffix(str, keep-keep/2)
		gone := len(str) - len(head) - len(tail)
		set(head + fmt.Sprintf("\n…[%d bytes cut for the model's context]…\n", gone) + tail)
		cut += gone
		s = toJSON(out)
	}
	if len(s) > limit-256 {
		// Too many small fields to cut: the model gets the shape only.
		keys := make([]string, 0, len(out))
		for k := range out {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if len(keys) > 20 {
			keys = append(keys[:20], fmt.Sprintf("and %d more", len(keys)-20))
		}
		n := len(s)
		shape := map[string]any{"context_cut": map[string]any{"bytes": n, "fields": keys,
			"note": "the result was too large for the model's context; read less at a time"}}
		return shape, toJSON(shape), n
	}
	out["context_cut"] = map[string]any{"bytes": cut, "note": "the longest fields were cut in the middle to fit the model's context"}
	return out, toJSON(out), cut
}

// longestString finds the longest string anywhere in v and a setter that
// replaces it.
func longestString(v any) (func(string), string) {
	var best string
	var set func(string)
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && len(s) > len(best) {
					best, set = s, func(n string) { x[k] = n }
				} else {
					walk(e)
				}
			}
		case []any:
			for i, e := range x {
				if s, ok := e.(string); ok && len(s) > len(best) {
					best, set = s, func(n string) { x[i] = n }
				} else {
					walk(e)
				}
			}
		}
	}
	walk(v)
	return set, best
}

func runePrefix(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func runeSuffix(s string, n int) string {
	if n >= len(s) {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// Citation ties a figure the model's summary states to the tool output
// that holds it, or says that none does.
type Citation struct {
	// Figure is the number as the summary wrote it.
	Figure string `json:"figure"`
	// Verified is false when no tool result the model saw holds the
	// number: the model did not read it anywhere, it made it up or worked
	// it out.
	Verified bool `json:"verified"`
	// CallID is the tool call whose result holds it (the model's call id,
	// as in the trajectory and the content log); Tool its tool; Field
	// where in the result (a JSON path such as stdout.text).
	CallID string `json:"call_id,omitempty"`
	Tool   string `json:"tool,omitempty"`
	Field  string `json:"field,omitempty"`
}

// figurePattern is a number as prose writes it: 60, -3, 1,234, 12.5, 40%.
var figurePattern = regexp.MustCompile(`-?\d+(?:,\d{3})*(?:\.\d+)?`)

// cite finds each number the summary states in the results the model
// saw, latest call first (the figure it most likely took), and marks the
// ones found in none as unverified.
func cite(summary string, ev []evidence) []Citation {
	var out []Citation
	seen := map[string]bool{}
	for _, loc := range figurePattern.FindAllStringIndex(summary, -1) {
		fig := summary[loc[0]:loc[1]]
		// A digit glued to letters (gpt-4o, v2, 3rd) names something.
		if loc[0] > 0 && isWordByte(summary[loc[0]-1]) || loc[1] < len(summary) && isWordByte(summary[loc[1]]) {
			continue
		}
		if seen[fig] {
			continue
		}
		seen[fig] = true
		c := Citation{Figure: fig}
		for i := len(ev) - 1; i >= 0 && !c.Verified; i-- {
			if field, ok := findFigure(ev[i].out, fig, ""); ok {
				c = Citation{Figure: fig, Verified: true, CallID: ev[i].callID, Tool: ev[i].tool, Field: field}
			}
		}
		out = append(out, c)
	}
	return out
}

func isWordByte(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// findFigure looks for fig in v's strings (as a number of its own, not
// part of a longer one) and numbers, and returns where.
func findFigure(v any, fig, at string) (string, bool) {
	plain := strings.ReplaceAll(strings.TrimPrefix(fig, "-"), ",", "")
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "context_cut" {
				continue
			}
			if f, ok := findFigure(x[k], fig, join(at, k)); ok {
				return f, true
			}
		}
	case []any:
		for i, e := range x {
			if f, ok := findFigure(e, fig, fmt.Sprintf("%s[%d]", at, i)); ok {
				return f, true
			}
		}
	case string:
		if containsNumber(x, fig) || plain != fig && containsNumber(x, plain) {
			return at, true
		}
	case float64:
		if want, err := strconv.ParseFloat(strings.ReplaceAll(fig, ",", ""), 64); err == nil && want == x {
			return at, true
		}
	}
	return "", false
}

func join(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}

// containsNumber reports whether s holds n with no digit (or decimal
// part) glued to either side.
func containsNumber(s, n string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], n)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(n)
		before := j == 0 || !isDigit(s[j-1]) && s[j-1] != '.' && s[j-1] != ','
		after := end == len(s) || !isDigit(s[end]) && !((s[end] == '.' || s[end] == ',') && end+1 < len(s) && isDigit(s[end+1]))
		if before && after {
			return true
		}
		i = j + 1
	}
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// contentLog is the opt-in record of what the run's calls carried and
// answered, one JSON line per tool call or model reply, keyed by call id,
// with the run's secrets redacted and a bound on its size.
type contentLog struct {
	mu      sync.Mutex
	w       io.Writer
	secrets [][]byte
	left    int64
	full    bool
}

// maxContentLog bounds a run's content log.
const maxContentLog = 256 << 20

func newContentLog(w io.Writer, secrets []string) *contentLog {
	l := &contentLog{w: w, left: maxContentLog}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		l.secrets = append(l.secrets, []byte(s))
		// The form a JSON string spells it in, if it differs.
		if q, _ := json.Marshal(s); !bytes.Equal(q[1:len(q)-1], []byte(s)) {
			l.secrets = append(l.secrets, q[1:len(q)-1])
		}
	}
	return l
}

func (l *contentLog) write(ev map[string]any) {
	if l == nil || l.w == nil {
		return
	}
	ev["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(ev)
	for _, s := range l.secrets {
		b = bytes.ReplaceAll(b, s, []byte("[REDACTED]"))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.full {
		return
	}
	if int64(len(b))+1 > l.left {
		l.full = true
		b, _ = json.Marshal(map[string]any{"type": "content_log_full", "limit_bytes": maxContentLog})
	}
	l.left -= int64(len(b)) + 1
	_, _ = l.w.Write(append(b, '\n'))
}

// attribute says which call made each artifact: an input the run copied
// in and nothing changed, or the call during which the file was last
// modified (by the sandbox's clock, which is the host's).
func attribute(arts []Artifact, inputs map[string]string, calls []evidence) {
	for i := range arts {
		a := &arts[i]
		if sum, ok := inputs[a.Path]; ok && sum == a.SHA256 {
			a.Input = true
			continue
		}
		const slack = time.Second // file systems keep coarser times than calls are apart
		for j := len(calls) - 1; j >= 0; j-- {
			c := calls[j]
			if !a.ModifiedAt.Before(c.start.Add(-slack)) && !a.ModifiedAt.After(c.end.Add(slack)) {
				a.ProducedBy = c.callID
				break
			}
		}
	}
}

// unverified lists the figures no tool output holds.
func unverified(cs []Citation) []string {
	var out []string
	for _, c := range cs {
		if !c.Verified && !slices.Contains(out, c.Figure) {
			out = append(out, c.Figure)
		}
	}
	return out
}
