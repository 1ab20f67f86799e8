// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"errors"
	"fmt"
	"os"
)

const exampleConfig = `# corral serve configuration (TOML).
# Every key is a 'corral serve' flag with '_' in place of '-'. Precedence:
# command-line flags, then CORRAL_<KEY> environment variables, then this
# file, then the defaults shown here. Use it with: corral serve --config FILE

# Address of the lifecycle API. Keep it on loopback unless a TLS proxy fronts it.
listen = "127.0.0.1:8080"

# State database, runtime files and images. Default: /var/lib/corral for
# root, ~/.local/share/corral otherwise.
# data_dir = "/var/lib/corral"

# Runtime that runs sandboxes.
runtime = "oci"

# Longest time to live a sandbox may ask for ("0s": no limit, and sandboxes
# without a timeout are allowed; they must then be deleted by hand).
max_timeout = "0s"

# How long Terminated and Failed sandboxes stay visible to GET and list.
retain_terminated = "1h0m0s"

# Time budget for re-attaching to running sandboxes when the server starts.
recovery_timeout = "2m0s"

# How long in-flight requests may finish when the server is stopped.
shutdown_timeout = "30s"

# Logs: "json", "text", or "auto" (text on a terminal); level debug|info|warn|error.
log_format = "auto"
log_level = "info"

# An admin API key to create if it does not exist (prefer CORRAL_API_KEY
# in the environment over writing a key into a file).
# api_key = ""

# Accept requests without an API key. For local compatibility tests only.
insecure_no_auth = false
`

// configInit writes the example server configuration to args[0], or to
// stdout without it.
func configInit(e *env, args []string) int {
	if len(args) == 0 || args[0] == "-" {
		fmt.Fprint(e.Stdout, exampleConfig)
		return 0
	}
	f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fail(e, "%s already exists; not overwriting it", args[0])
	}
	if err != nil {
		return fail(e, "%v", err)
	}
	defer f.Close()
	if _, err := f.WriteString(exampleConfig); err != nil {
		return fail(e, "%v", err)
	}
	fmt.Fprintf(e.Stderr, "wrote %s\n", args[0])
	return 0
}
