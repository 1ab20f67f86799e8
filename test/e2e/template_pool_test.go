// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/dockertest"
	"github.com/corral-dev/corral/sdk"
)

// TestTemplateWarmCreateOCI, on the native runtime: a template with a
// warm pool keeps that many sandboxes ready; a create from it takes one
// (its status says so) and is personalised at the claim (the create's
// environment and metadata, the template's entrypoint), and the pool
// refills. A create of the same image without the template, or another
// tenant's, takes none of them. A template whose creates could not take
// a warm sandbox (a network policy) is refused with the reason; deleting
// the template removes its warm sandboxes.
func TestTemplateWarmCreateOCI(t *testing.T) {
	requireOCI(t)
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, dir, "--runtime", "oci")
	templateWarmCreate(t, s, "host", func() bool {
		entries, _ := os.ReadDir(filepath.Join(dir, "oci", "run", "bundles"))
		return len(entries) == 0
	})
}

// TestTemplateWarmCreateDocker is TestTemplateWarmCreateOCI on the docker
// runtime (a local engine): warm containers, claimed and personalised.
func TestTemplateWarmCreateDocker(t *testing.T) {
	cli := requireDocker(t)
	image := dockertest.Busybox(t)
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, dir, "--runtime", "docker")
	id, err := os.ReadFile(filepath.Join(dir, "server-id"))
	if err != nil {
		t.Fatal(err)
	}
	templateWarmCreate(t, s, image, func() bool {
		res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
			Filters: client.Filters{}.Add("label", "corral.dev/server="+strings.TrimSpace(string(id)))})
		entries, _ := os.ReadDir(filepath.Join(dir, "docker", "warm"))
		return err == nil && len(res.Items) == 0 && len(entries) == 0
	})
}

// templateWarmCreate runs the warm pool checks against s, with image;
// clean says whether nothing of the pool is left.
func templateWarmCreate(t *testing.T, s *server, image string, clean func() bool) {
	c := s.client(t)
	cx := ctx(t)
	spec, _ := json.Marshal(map[string]any{"image": map[string]string{"uri": image}, "entrypoint": []string{"sleep", "3600"}, "timeout": 600})
	tp, err := c.CreateTemplate(cx, api.Template{Name: "warm", Spec: spec, WarmPool: 1})
	if err != nil {
		t.Fatal(err)
	}
	if tp.WarmPool != 1 {
		t.Fatalf("template = %+v", tp)
	}
	ready := func() int {
		got, err := c.GetTemplate(cx, "warm")
		if err != nil {
			t.Fatal(err)
		}
		return got.WarmReady
	}
	testutil.WaitFor(t, time.Minute, "a warm sandbox", func() bool { return ready() == 1 })

	// The same image without the template: a cold create.
	cold, err := c.CreateSandbox(cx, ociCreate(image), sdk.CreateOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cold.Status.Message, "warm") || ready() != 1 {
		t.Errorf("a create without the template: %q, %d ready", cold.Status.Message, ready())
	}

	who := "claimer"
	sb, err := c.CreateSandbox(cx, api.CreateSandboxRequest{Env: map[string]*string{"WHO": &who}, Metadata: map[string]string{"team": "warm"},
		Extensions: map[string]string{"corral.dev/template": "warm"}}, sdk.CreateOptions{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetSandbox(cx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != api.StateRunning || got.Status.Message != "started from a warm sandbox" || got.Metadata["team"] != "warm" {
		t.Errorf("the template's create = %+v", got)
	}
	box, err := c.Sandbox(cx, sb.ID, sdk.SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, _, code, err := box.Run(cx, `echo "$WHO"; ps -o args | grep -c '^sleep 3600'`, sdk.CommandOptions{})
	if err != nil || code != 0 || !strings.Contains(out, "claimer\n1\n") {
		t.Errorf("in the warm create: %q, %d, %v", out, code, err)
	}
	testutil.WaitFor(t, time.Minute, "the pool to refill", func() bool { return ready() == 1 })

	// Refused: a pool its creates could not use.
	policed, _ := json.Marshal(map[string]any{"image": map[string]string{"uri": image},
		"networkPolicy": map[string]any{"defaultAction": "deny", "egress": []any{}}})
	var ae *sdk.APIError
	if _, err := c.CreateTemplate(cx, api.Template{Name: "policed", Spec: policed, WarmPool: 1}); !errors.As(err, &ae) ||
		ae.Status != 400 || !strings.Contains(ae.Message, "network policy") {
		t.Errorf("a policed template with a warm pool = %v", err)
	}

	if err := c.DeleteTemplate(cx, "warm", false); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{sb.ID, cold.ID} {
		if err := c.DeleteSandbox(cx, id); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing of the pool is left.
	testutil.WaitFor(t, 30*time.Second, "the warm sandbox removed with its template", clean)
}
