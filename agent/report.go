// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Report is what a run did, from tool results and the model's usage
// counts, not from what the model says about itself.
type Report struct {
	// RunID names the run: in the trajectory's start event, the sandbox's
	// metadata (corral-agent-run) and every line of the tool layer's trace.
	RunID      string `json:"run_id"`
	StopReason string `json:"stop_reason"`
	// StopMessage explains the stop in a sentence.
	StopMessage      string     `json:"stop_message,omitempty"`
	Model            string     `json:"model"`
	SandboxID        string     `json:"sandbox_id,omitempty"`
	SandboxDeleted   bool       `json:"sandbox_deleted"`
	SandboxExpiresAt *time.Time `json:"sandbox_expires_at,omitempty"`
	// Sandboxes are all the sandboxes the run made, with their fate: the
	// run's own, and any a create made before it failed (a readiness
	// timeout, a lost answer).
	Sandboxes []SandboxFate `json:"sandboxes"`
	Network   []string      `json:"network"`
	// Credentials are the hosts whose HTTPS requests the vault signs.
	Credentials      []string        `json:"credentials,omitempty"`
	Turns            int             `json:"turns"`
	ToolCalls        int             `json:"tool_calls"`
	ToolErrors       int             `json:"tool_errors"`
	Commands         []CommandRecord `json:"commands"`
	PromptTokens     int             `json:"prompt_tokens"`
	CompletionTokens int             `json:"completion_tokens"`
	DurationMS       int64           `json:"duration_ms"`
	Artifacts        []Artifact      `json:"artifacts"`
	// ModelSummary is the model's final message, quoted as it wrote it.
	ModelSummary string `json:"model_summary,omitempty"`
	// SummaryFigures cites, for each number the summary states, the tool
	// call whose result (as the model saw it) holds it, or marks it
	// unverified; Unverified lists those.
	SummaryFigures []Citation `json:"summary_figures"`
	Unverified     []string   `json:"unverified,omitempty"`
}

// SandboxFate is what became of a sandbox the run made.
type SandboxFate struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
	Error   string `json:"error,omitempty"`
}

// CommandRecord is one command_run or code_run as its result reported it.
type CommandRecord struct {
	// CallID is the model's id of the call (the trajectory's and the
	// content log's key); RequestID the X-Request-ID its requests to
	// corral carried; ExecutionID execd's id of the command.
	CallID      string `json:"call_id"`
	RequestID   string `json:"request_id,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	Tool        string `json:"tool"`
	ExitCode    *int   `json:"exit_code,omitempty"`
	CodeError   string `json:"code_error,omitempty"`
	TimedOut    bool   `json:"timed_out"`
	DurationMS  int64  `json:"duration_ms"`
}

// Artifact is a file pulled out of the work directory.
type Artifact struct {
	Path   string `json:"path"`
	Local  string `json:"local"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	// Input marks a file the run copied in (--input) and nothing changed.
	Input bool `json:"input,omitempty"`
	// ProducedBy is the call during which the file was last modified.
	ProducedBy string    `json:"produced_by,omitempty"`
	ModifiedAt time.Time `json:"modified_at"`
}

// trajectory writes JSON lines, one per event, each with its time.
type trajectory struct {
	mu sync.Mutex
	w  io.Writer
}

func (t *trajectory) write(ev map[string]any) {
	if t.w == nil {
		return
	}
	ev["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(ev)
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = t.w.Write(append(b, '\n'))
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Markdown renders the report for people.
func (rep *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# corral agent report\n\n")
	fmt.Fprintf(&b, "- **Stopped**: `%s` — %s\n", rep.StopReason, rep.StopMessage)
	fmt.Fprintf(&b, "- **Model**: %s, %d turns, %d prompt and %d completion tokens\n", rep.Model, rep.Turns, rep.PromptTokens, rep.CompletionTokens)
	fmt.Fprintf(&b, "- **Tool calls**: %d (%d failed)\n", rep.ToolCalls, rep.ToolErrors)
	net := "none"
	if len(rep.Network) > 0 {
		net = strings.Join(rep.Network, ", ")
	}
	if len(rep.Credentials) > 0 {
		net += " (credentials injected for " + strings.Join(rep.Credentials, ", ") + ")"
	}
	fmt.Fprintf(&b, "- **Sandbox**: %s, network: %s, ", rep.SandboxID, net)
	switch {
	case rep.SandboxID == "":
		b.WriteString("never created\n")
	case rep.SandboxDeleted:
		b.WriteString("deleted\n")
	case rep.SandboxExpiresAt != nil:
		fmt.Fprintf(&b, "NOT deleted: it expires at %s (its TTL)\n", rep.SandboxExpiresAt.UTC().Format(time.RFC3339))
	default:
		b.WriteString("NOT deleted\n")
	}
	fmt.Fprintf(&b, "- **Duration**: %.1f s\n", float64(rep.DurationMS)/1000)
	fmt.Fprintf(&b, "- **Run**: `%s` (in the trajectory, the trace and the sandbox's metadata)\n\n", rep.RunID)
	if others := len(rep.Sandboxes) > 1 || len(rep.Sandboxes) == 1 && rep.Sandboxes[0].ID != rep.SandboxID; others {
		b.WriteString("## Every sandbox the run made\n\n")
		for _, f := range rep.Sandboxes {
			fate := "deleted"
			if !f.Deleted {
				fate = "NOT deleted: " + f.Error
			}
			fmt.Fprintf(&b, "- %s: %s\n", f.ID, fate)
		}
		b.WriteString("\n")
	}
	if len(rep.Commands) > 0 {
		b.WriteString("## Commands (from their results)\n\n| # | call | tool | exit | timed out | ms |\n|---|---|---|---|---|---|\n")
		for i, c := range rep.Commands {
			exit := "-"
			if c.ExitCode != nil {
				exit = fmt.Sprint(*c.ExitCode)
			}
			if c.CodeError != "" {
				exit = c.CodeError
			}
			fmt.Fprintf(&b, "| %d | `%s` | %s | %s | %v | %d |\n", i+1, c.CallID, c.Tool, exit, c.TimedOut, c.DurationMS)
		}
		b.WriteString("\n")
	}
	if len(rep.Artifacts) > 0 {
		b.WriteString("## Artifacts\n\n")
		for _, a := range rep.Artifacts {
			from := ""
			switch {
			case a.Input:
				from = ", an input"
			case a.ProducedBy != "":
				from = ", made by `" + a.ProducedBy + "`"
			}
			fmt.Fprintf(&b, "- `%s` → `%s` (%d bytes, sha256 %s%s)\n", a.Path, a.Local, a.Bytes, a.SHA256[:12], from)
		}
		b.WriteString("\n")
	}
	if rep.ModelSummary != "" {
		b.WriteString("## The model's summary (its own words)\n\n")
		for _, l := range strings.Split(rep.ModelSummary, "\n") {
			b.WriteString("> " + l + "\n")
		}
		if len(rep.SummaryFigures) > 0 {
			b.WriteString("\n### Where its figures come from\n\n")
			for _, c := range rep.SummaryFigures {
				if c.Verified {
					fmt.Fprintf(&b, "- %s: `%s` (%s), in `%s`\n", c.Figure, c.CallID, c.Tool, c.Field)
				} else {
					fmt.Fprintf(&b, "- %s: **unverified**, no tool result the model saw holds it\n", c.Figure)
				}
			}
		}
	}
	return b.String()
}
