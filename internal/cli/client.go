// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"

	"github.com/corral-dev/corral/sdk"
)

// clientFlags are the flags of every command that talks to a server.
type clientFlags struct {
	server string
	apiKey string
	output string
}

func (c *clientFlags) register(fs *flag.FlagSet, e *env) {
	fs.StringVar(&c.server, "server", "", "server address (default: $CORRAL_SERVER, else $OPEN_SANDBOX_PROTOCOL://$OPEN_SANDBOX_DOMAIN, else http://localhost:8080)")
	fs.StringVar(&c.apiKey, "api-key", "", "API key (default: $OPEN_SANDBOX_API_KEY)")
	fs.StringVar(&c.output, "o", "table", "output format: table or json")
}

func (c *clientFlags) client(e *env) (*sdk.Client, error) {
	var opts []sdk.Option
	server := c.server
	if server == "" {
		server = e.getenv("CORRAL_SERVER")
	}
	if server != "" {
		opts = append(opts, sdk.WithBaseURL(server))
	}
	if c.apiKey != "" {
		opts = append(opts, sdk.WithAPIKey(c.apiKey))
	}
	if c.output != "table" && c.output != "json" {
		return nil, fmt.Errorf("-o %q: want table or json", c.output)
	}
	return sdk.New(opts...)
}

// apiFail prints an API error as one sentence (or JSON with -o json).
func (c *clientFlags) apiFail(e *env, err error) int {
	if c.output == "json" {
		out := map[string]any{"error": err.Error()}
		var ae *sdk.APIError
		if errors.As(err, &ae) {
			out = map[string]any{"error": ae.Message, "code": ae.Code, "status": ae.Status, "requestId": ae.RequestID}
		}
		b, _ := json.Marshal(out)
		fmt.Fprintln(e.stderr, string(b))
		return 1
	}
	return fail(e, "%v", err)
}

func printJSON(e *env, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(e.stdout, string(b))
}
