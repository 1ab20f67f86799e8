// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sdk_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/corraltest"
	"github.com/corral-dev/corral/sdk"
)

const exampleKey = "ck_sdk-examples-0123456789"

// TestMain runs the package's examples against a real `corral serve` on
// the native runtime, configured the way users configure the SDK: through
// OPEN_SANDBOX_DOMAIN and OPEN_SANDBOX_API_KEY. Without the root tier the
// examples are left out (CI requires them, so they cannot skip silently).
func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv(testutil.EnvRoot) != "1" || os.Geteuid() != 0 {
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
			_ = f.Value.Set("^Test")
			fmt.Fprintf(os.Stderr, "sdk: examples need a runtime: set %s=1 (as root) to run them\n", testutil.EnvRoot)
		}
		os.Exit(testutil.NoLeaks(m.Run()))
	}
	os.Exit(testutil.NoLeaks(withServer(m)))
}

func withServer(m *testing.M) int {
	dir, err := os.MkdirTemp("", "corral-sdk-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin, err := corraltest.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	data := filepath.Join(dir, "data")
	srv, err := corraltest.Serve(bin, data, exampleKey, "--runtime", "oci")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	os.Setenv(sdk.EnvDomain, strings.TrimPrefix(srv.URL, "http://"))
	os.Setenv(sdk.EnvAPIKey, exampleKey)
	code := m.Run()
	if left := deleteAll(); left != 0 {
		fmt.Fprintf(os.Stderr, "sdk: examples left %d sandboxes behind\n", left)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "server log:\n%s", srv.Log())
	}
	return code
}

// deleteAll deletes what the examples left and says how much that was.
func deleteAll() int {
	c, err := sdk.New()
	if err != nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ids []string
	for sb, err := range c.Sandboxes(ctx, sdk.ListOptions{}) {
		if err != nil {
			break
		}
		ids = append(ids, sb.ID)
	}
	for _, id := range ids {
		_ = c.DeleteSandbox(ctx, id)
	}
	return len(ids)
}
