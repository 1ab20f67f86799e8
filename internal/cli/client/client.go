// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/sdk"
)

// clientFlags are the flags of every command that talks to a server.
type clientFlags struct {
	server  string
	apiKey  string
	profile string
	output  string
	formats []string
	// http, when set, is the HTTP client requests go through.
	http *http.Client
}

// register adds the connection flags and -o with the given formats (the
// first is the default).
func (c *clientFlags) register(fs *flag.FlagSet, formats ...string) {
	if len(formats) == 0 {
		formats = []string{"table", "json", "yaml"}
	}
	c.formats = formats
	fs.StringVar(&c.server, "server", "", "server address (default: $CORRAL_SERVER, $OPEN_SANDBOX_DOMAIN, the profile's, else http://localhost:8080)")
	fs.StringVar(&c.apiKey, "api-key", "", "API key (default: $CORRAL_API_KEY, $OPEN_SANDBOX_API_KEY, else the profile's)")
	fs.StringVar(&c.profile, "profile", "", "connection profile from 'corral config set' (default: $CORRAL_PROFILE, else the current one)")
	fs.StringVar(&c.output, "o", formats[0], "output format: "+strings.Join(formats, ", "))
}

// client resolves where to connect and with which key. Precedence: flags,
// CORRAL_SERVER / CORRAL_API_KEY, the OpenSandbox variables, the profile,
// then http://localhost:8080 without a key.
func (c *clientFlags) client(e *env) (*sdk.Client, error) {
	if indexOf(c.formats, c.output) < 0 {
		return nil, fmt.Errorf("-o %q: want one of %s", c.output, strings.Join(c.formats, ", "))
	}
	server, key := c.server, c.apiKey
	if server == "" {
		server = e.Getenv("CORRAL_SERVER")
	}
	if server == "" && e.Getenv(sdk.EnvDomain) != "" {
		proto := e.Getenv(sdk.EnvProtocol)
		if proto == "" {
			proto = "http"
		}
		server = proto + "://" + e.Getenv(sdk.EnvDomain)
	}
	if key == "" {
		key = e.Getenv("CORRAL_API_KEY")
	}
	if key == "" {
		key = e.Getenv(sdk.EnvAPIKey)
	}
	if server == "" || key == "" {
		p, err := loadProfile(e, c.profile)
		if err != nil {
			return nil, err
		}
		if server == "" {
			server = p.Server
		}
		if key == "" {
			key = p.APIKey
		}
	}
	if server == "" {
		server = "http://" + sdk.DefaultDomain
	}
	opts := []sdk.Option{sdk.WithBaseURL(server), sdk.WithAPIKey(key)}
	if c.http != nil {
		opts = append(opts, sdk.WithHTTPClient(c.http))
	}
	return sdk.New(opts...)
}

// fail reports an error the way -o asks and returns code.
func (c *clientFlags) fail(e *env, err error, code int) int {
	return report(e, c.output, err, code)
}

// apiFail reports an API error with exit code 1.
func (c *clientFlags) apiFail(e *env, err error) int { return c.fail(e, err, 1) }

// findSandbox returns the sandbox of an id or of a unique prefix of one,
// like docker.
func findSandbox(ctx context.Context, c *sdk.Client, id string) (*api.Sandbox, error) {
	sb, err := c.GetSandbox(ctx, id)
	if err == nil || !errors.Is(err, sdk.ErrNotFound) || len(id) >= 36 || id == "" {
		return sb, err
	}
	var matches []api.Sandbox
	for sb, lerr := range c.Sandboxes(ctx, sdk.ListOptions{}) {
		if lerr != nil {
			return nil, err
		}
		if strings.HasPrefix(sb.ID, id) {
			matches = append(matches, sb)
		}
	}
	switch len(matches) {
	case 1:
		return &matches[0], nil
	case 0:
		return nil, err
	}
	return nil, errdefs.Newf(errdefs.ErrInvalidArgument, "", "%q matches %d sandboxes (%s, ...); give more of the id", id, len(matches), matches[0].ID)
}

// resolveID turns an id or a unique prefix of one into the full id.
func resolveID(ctx context.Context, c *sdk.Client, id string) (string, error) {
	sb, err := findSandbox(ctx, c, id)
	if err != nil {
		return id, err
	}
	return sb.ID, nil
}

// sandbox resolves an id and returns the handle of its execd.
func sandbox(ctx context.Context, c *sdk.Client, id string) (*sdk.Sandbox, error) {
	sb, err := findSandbox(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if sb.Status.State != api.StateRunning {
		return nil, errdefs.Newf(errdefs.ErrFailedPrecondition, "", "sandbox %s is %s, not Running", sb.ID, sb.Status.State)
	}
	return c.Sandbox(ctx, sb.ID, sdk.SandboxOptions{})
}

// invocation is a parsed client command, connected to its server.
type invocation struct {
	c    *sdk.Client
	pos  []string     // positional arguments; with resolve, pos[0] is a full sandbox id
	sb   *api.Sandbox // with resolve, the sandbox pos[0] names
	tail []string     // what followed "--" (or the positional limit)
}

// setup parses args (see parseArgs; maxPos bounds the positionals), asks
// check whether they are right (a non-empty answer is printed as a usage
// error), connects, and with resolveID turns pos[0] from an id prefix into
// the full id. When ok is false the command returns code; failures to
// connect or resolve exit with errCode.
func (c *clientFlags) setup(ctx context.Context, e *env, fs *flag.FlagSet, args []string, maxPos int, resolve bool, errCode int,
	check func(pos, tail []string) string) (inv invocation, ok bool, code int) {
	pos, tail, ok, code := parseArgs(fs, e, args, maxPos)
	if !ok {
		return inv, false, code
	}
	if msg := check(pos, tail); msg != "" {
		return inv, false, fail(e, "%s", msg)
	}
	sc, err := c.client(e)
	if err != nil {
		return inv, false, c.fail(e, err, errCode)
	}
	if resolve && len(pos) > 0 {
		if inv.sb, err = findSandbox(ctx, sc, pos[0]); err != nil {
			return inv, false, c.fail(e, err, errCode)
		}
		pos[0] = inv.sb.ID
	}
	inv.c, inv.pos, inv.tail = sc, pos, tail
	return inv, true, 0
}

// nArgs is a check for setup: exactly n positionals, else msg.
func nArgs(n int, msg string) func(pos, tail []string) string {
	return func(pos, _ []string) string {
		if len(pos) != n {
			return msg
		}
		return ""
	}
}

// someArgs is a check for setup: at least one positional, else msg.
func someArgs(msg string) func(pos, tail []string) string {
	return func(pos, _ []string) string {
		if len(pos) == 0 {
			return msg
		}
		return ""
	}
}
