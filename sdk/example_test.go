// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package sdk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/sdk"
)

// newSandbox creates a sandbox of the "host" image (corral's built-in
// image made of the server's own /usr; any OCI image reference works the
// same way) that expires after ten minutes, and waits until it is ready.
func newSandbox(ctx context.Context, c *sdk.Client, metadata map[string]string) *sdk.Sandbox {
	ttl := int64(600)
	created, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{
		Image:      &api.ImageSpec{URI: "host"},
		Entrypoint: []string{"sleep", "infinity"},
		Timeout:    &ttl,
		Metadata:   metadata,
	}, sdk.CreateOptions{Wait: true})
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Sandbox(ctx, created.ID, sdk.SandboxOptions{})
	if err != nil {
		log.Fatal(err)
	}
	return sb
}

// Create a sandbox, run a command in it and delete it. The client reads
// the server's address and key from OPEN_SANDBOX_DOMAIN and
// OPEN_SANDBOX_API_KEY, like OpenSandbox's clients.
func ExampleClient_CreateSandbox() {
	ctx := context.Background()
	c, err := sdk.New()
	if err != nil {
		log.Fatal(err)
	}
	sb := newSandbox(ctx, c, nil)
	defer c.DeleteSandbox(ctx, sb.ID)

	stdout, _, code, err := sb.Run(ctx, "echo hello from $(uname -s)", sdk.CommandOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(stdout)
	fmt.Println("exit code", code)
	// Output:
	// hello from Linux
	// exit code 0
}

// Stream a command's output to your own writers as it is produced, and
// get its exit code; a dropped connection is resumed without losing or
// repeating output.
func ExampleSandbox_Exec() {
	ctx := context.Background()
	c, _ := sdk.New()
	sb := newSandbox(ctx, c, nil)
	defer c.DeleteSandbox(ctx, sb.ID)

	var stderr bytes.Buffer
	code, err := sb.Exec(ctx, "for i in 1 2 3; do echo step $i; done; echo oops >&2; exit 3",
		sdk.CommandOptions{Cwd: "/tmp", Env: map[string]string{"LANG": "C"}, Timeout: time.Minute},
		os.Stdout, &stderr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("stderr %q, exit code %d\n", stderr.String(), code)
	// Output:
	// step 1
	// step 2
	// step 3
	// stderr "oops\n", exit code 3
}

// Read a command's output as io.Readers, like os/exec's pipes.
func ExampleSandbox_Start() {
	ctx := context.Background()
	c, _ := sdk.New()
	sb := newSandbox(ctx, c, nil)
	defer c.DeleteSandbox(ctx, sb.ID)

	cmd := sb.Start(ctx, "seq 1 100000", sdk.CommandOptions{})
	go io.Copy(io.Discard, cmd.Stderr())
	n, _ := io.Copy(io.Discard, cmd.Stdout())
	code, err := cmd.Wait()
	fmt.Println(n, "bytes, exit code", code, err)
	// Output:
	// 588895 bytes, exit code 0 <nil>
}

// Start a long-running command in the background and follow its output
// by cursor.
func ExampleSandbox_StartBackground() {
	ctx := context.Background()
	c, _ := sdk.New()
	sb := newSandbox(ctx, c, nil)
	defer c.DeleteSandbox(ctx, sb.ID)

	id, err := sb.StartBackground(ctx, "echo starting; sleep 0.2; echo ready", sdk.CommandOptions{})
	if err != nil {
		log.Fatal(err)
	}
	var out []byte
	var cursor int64
	for !bytes.Contains(out, []byte("ready\n")) {
		chunk, next, err := sb.CommandLogs(ctx, id, cursor)
		if err != nil {
			log.Fatal(err)
		}
		out, cursor = append(out, chunk...), next
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Print(string(out))
	// Output:
	// starting
	// ready
}

// Move files in and out as streams; nothing is held in memory whole.
func ExampleSandbox_Upload() {
	ctx := context.Background()
	c, _ := sdk.New()
	sb := newSandbox(ctx, c, nil)
	defer c.DeleteSandbox(ctx, sb.ID)

	if err := sb.Upload(ctx, "/work/input.csv", strings.NewReader("a,b\n1,2\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	if _, _, _, err := sb.Run(ctx, "tr , ';' < /work/input.csv > /work/output.csv", sdk.CommandOptions{}); err != nil {
		log.Fatal(err)
	}
	if _, err := sb.Download(ctx, "/work/output.csv", os.Stdout); err != nil {
		log.Fatal(err)
	}
	// Output:
	// a;b
	// 1;2
}

// A session keeps exported variables and the working directory between
// commands.
func ExampleSandbox_CreateSession() {
	ctx := context.Background()
	c, _ := sdk.New()
	sb := newSandbox(ctx, c, nil)
	defer c.DeleteSandbox(ctx, sb.ID)

	se, err := sb.CreateSession(ctx, "/tmp")
	if err != nil {
		log.Fatal(err)
	}
	defer se.Close(ctx)
	print := func(ev sdk.Event) error {
		if ev.Type == api.EventStdout {
			fmt.Println(ev.Text)
		}
		return nil
	}
	_, _ = se.Run(ctx, "export GREETING=hi; cd /etc", 0, print)
	_, _ = se.Run(ctx, "echo $GREETING from $(pwd)", 0, print)
	// Output:
	// hi from /etc
}

// List sandboxes page by page with an iterator, filtered by metadata.
func ExampleClient_Sandboxes() {
	ctx := context.Background()
	c, _ := sdk.New()
	for range 3 {
		sb := newSandbox(ctx, c, map[string]string{"example": "sandboxes"})
		defer c.DeleteSandbox(ctx, sb.ID)
	}
	n := 0
	for sb, err := range c.Sandboxes(ctx, sdk.ListOptions{Metadata: map[string]string{"example": "sandboxes"}, PageSize: 2}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(sb.Status.State, sb.Metadata["example"])
		n++
	}
	fmt.Println(n, "sandboxes")
	// Output:
	// Running sandboxes
	// Running sandboxes
	// Running sandboxes
	// 3 sandboxes
}

// Errors keep the server's error kind across the wire.
func ExampleAPIError() {
	ctx := context.Background()
	c, _ := sdk.New()
	_, err := c.GetSandbox(ctx, "no-such-sandbox")
	fmt.Println(errors.Is(err, sdk.ErrNotFound))
	var apiErr *sdk.APIError
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.Status, apiErr.Code)
	}
	// Output:
	// true
	// 404 SANDBOX::NOT_FOUND
}
