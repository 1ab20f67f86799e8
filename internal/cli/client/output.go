// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v4"
	"golang.org/x/term"

	"github.com/corral-dev/corral/sdk"
)

// printValue prints v as JSON or YAML (field names as on the wire).
func printValue(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format != "yaml" {
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return err
	}
	y, err := yaml.Marshal(generic)
	if err != nil {
		return err
	}
	_, err = w.Write(y)
	return err
}

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(headers...)
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() { _ = t.tw.Flush() }

// errorJSON is how -o json and -o yaml report an error on stderr.
type errorJSON struct {
	Error     string `json:"error"`
	Kind      string `json:"kind,omitempty"`
	Code      string `json:"code,omitempty"`
	Status    int    `json:"status,omitempty"`
	RequestID string `json:"requestId,omitempty"`
}

// kindName names err's kind for machine-readable errors.
func kindName(err error) string {
	for _, k := range []struct {
		kind error
		name string
	}{
		{sdk.ErrNotFound, "not_found"}, {sdk.ErrAlreadyExists, "already_exists"}, {sdk.ErrInvalidArgument, "invalid_argument"},
		{sdk.ErrFailedPrecondition, "failed_precondition"}, {sdk.ErrUnavailable, "unavailable"}, {sdk.ErrNotImplemented, "not_implemented"},
		{sdk.ErrPermissionDenied, "permission_denied"}, {sdk.ErrUnauthenticated, "unauthenticated"}, {sdk.ErrResourceExhausted, "resource_exhausted"},
	} {
		if errors.Is(err, k.kind) {
			return k.name
		}
	}
	return ""
}

// report prints err on stderr: one sentence (with the request id) for
// people, or a JSON object with -o json / -o yaml. It returns code.
func report(e *env, format string, err error, code int) int {
	if format == "json" || format == "yaml" {
		out := errorJSON{Error: err.Error(), Kind: kindName(err)}
		var ae *sdk.APIError
		if errors.As(err, &ae) {
			out.Error, out.Code, out.Status, out.RequestID = ae.Message, ae.Code, ae.Status, ae.RequestID
		}
		b, _ := json.Marshal(out)
		fmt.Fprintln(e.Stderr, string(b))
		return code
	}
	msg := err.Error()
	if errors.Is(err, sdk.ErrUnavailable) && !strings.Contains(msg, "request id") {
		msg += " (is the server running? set --server, CORRAL_SERVER or a profile with 'corral config set')"
	}
	if errors.Is(err, sdk.ErrUnauthenticated) {
		msg += " (set --api-key, CORRAL_API_KEY or a profile with 'corral config set')"
	}
	fmt.Fprintln(e.Stderr, "corral: "+msg)
	return code
}

// terminalFD returns v's descriptor and whether it is a terminal.
func terminalFD(v any) (int, bool) {
	f, ok := v.(*os.File)
	if !ok {
		return -1, false
	}
	fd := int(f.Fd())
	return fd, term.IsTerminal(fd)
}

// age renders how long ago t was, in one unit, like kubectl.
func age(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
