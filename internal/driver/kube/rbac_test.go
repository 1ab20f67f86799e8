// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/kube/controller"
	"github.com/corral-dev/corral/internal/kube/kubetest"
	"github.com/corral-dev/corral/internal/kube/records"
	"github.com/corral-dev/corral/internal/quota"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/template"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/webhook"
)

// TestLeastPrivilege: every manifest of deploy/kubernetes passes the API
// server's validation (a dry run), and the controller and the server,
// each acting as its service account with only the ClusterRole the
// manifests give it, run sandboxes end to end: a pool, an adoption, a pod
// of its own, an import, a stop, deletes.
func TestLeastPrivilege(t *testing.T) {
	c := kubetest.RequireKube(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	root := testutil.ModuleRoot(t)
	files, _ := filepath.Glob(filepath.Join(root, "deploy", "kubernetes", "*.yaml"))
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		objs, err := kubetest.Manifests(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetKind() == "Namespace" {
				continue
			}
			if o.GetNamespace() != "" {
				o.SetNamespace(ns)
			}
			if err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("corral-tests"), client.ForceOwnership, client.DryRunAll); err != nil {
				t.Errorf("%s: %s %s: %v", filepath.Base(f), o.GetKind(), o.GetName(), err)
			}
		}
	}

	objs, err := kubetest.Manifests(filepath.Join(root, "deploy", "kubernetes", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" {
			if err := c.Apply(ctx, o); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := c.Client.Delete(context.Background(), o); client.IgnoreNotFound(err) != nil {
					t.Errorf("delete ClusterRole %s: %v", o.GetName(), err)
				}
			})
		}
	}
	for _, sa := range []string{"corral-controller", "corral-server"} {
		if err := c.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: sa},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
		}
		if err := c.Client.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}

	image := c.Busybox(t)
	c.RunControllerAs(t, c.As(ns, "corral-controller"), controller.Config{
		Namespace: ns, CorralImage: c.CorralImage(t, corralBin), CorralImagePullPolicy: corev1.PullNever,
	})
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// The deployed server runs in the cluster: pod addresses.
	d, err := New(dctx, Config{REST: c.As(ns, "corral-server"), Namespace: ns, ImagePullPolicy: corev1.PullNever, Endpoints: EndpointsPod})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	pool := &v1alpha1.SandboxPool{
		ObjectMeta: metav1.ObjectMeta{Name: "rbac", Namespace: ns},
		Spec:       v1alpha1.SandboxPoolSpec{Warm: 1, Template: v1alpha1.SandboxTemplate{Image: image, ImagePullPolicy: corev1.PullNever}},
	}
	if err := c.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	waitPoolReady(t, d, pool.Name, 1, time.Minute)
	for i, res := range []driver.Resources{{}, {MemoryBytes: 128 << 20}} {
		spec := driver.Spec{ID: fmt.Sprintf("rbac%d-%s", i, randID()), Image: driver.Image{URI: image},
			Entrypoint: []string{"sleep", "3600"}, Resources: res, ExecdToken: randID()}
		if _, err := d.Create(ctx, spec); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		ep, err := d.Endpoint(ctx, spec.ID, insandbox.ExecdPort)
		if err != nil {
			t.Fatal(err)
		}
		if out, code := kubetest.Exec(t, ep.String(), spec.ExecdToken, "echo ok"); code != 0 || out != "ok\n" {
			t.Errorf("command %d = %q, %d", i, out, code)
		}
		if _, _, err := d.Console(ctx, spec.ID, 1<<10); err != nil {
			t.Errorf("console %d: %v", i, err)
		}
		if in, err := d.Import(ctx, spec.ID); err != nil || in.Spec.ExecdToken != spec.ExecdToken {
			t.Errorf("import %d = %+v, %v", i, in, err)
		}
		if err := d.Stop(ctx, spec.ID, time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Wait(ctx, spec.ID); err != nil {
			t.Fatal(err)
		}
		if err := d.SetExpiry(ctx, spec.ID, time.Now().Add(time.Hour), driver.Change{At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := d.Destroy(ctx, spec.ID); err != nil {
			t.Fatal(err)
		}
	}

	// Named volumes: a claim made and then owned by a second sandbox that
	// mounts it, listed, refused while mounted, gone with the last; a
	// claim kept after its sandbox, removed.
	gone := sandbox.Volume{Name: "v", Kind: sandbox.VolumeNamed, Claim: "gone", Create: true, DeleteWithSandbox: true, Target: "/v"}
	kept := sandbox.Volume{Name: "k", Kind: sandbox.VolumeNamed, Claim: "kept", Create: true, Target: "/k"}
	var ids []string
	for i, vols := range [][]sandbox.Volume{{gone, kept}, {gone}} {
		spec := driver.Spec{ID: fmt.Sprintf("rbacv%d-%s", i, randID()), Tenant: "t", Image: driver.Image{URI: image},
			Entrypoint: []string{"sleep", "3600"}, ExecdToken: randID(), Volumes: vols}
		if _, err := d.Create(ctx, spec); err != nil {
			t.Fatalf("create with volumes %d: %v", i, err)
		}
		ids = append(ids, spec.ID)
	}
	if vols, err := d.ListVolumes(ctx, "t"); err != nil || len(vols) != 2 {
		t.Errorf("ListVolumes = %+v, %v", vols, err)
	}
	if err := d.RemoveVolume(ctx, "t", "kept"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("RemoveVolume of a mounted volume = %v", err)
	}
	for _, id := range ids {
		if err := d.Destroy(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.RemoveVolume(ctx, "t", "kept"); err != nil {
		t.Errorf("RemoveVolume = %v", err)
	}
	if vols, err := d.ListVolumes(ctx, "t"); err != nil || len(vols) != 0 {
		t.Errorf("ListVolumes after the sandboxes and the remove = %+v, %v", vols, err)
	}
	// The records a stateless server keeps in the cluster.
	recs, err := records.New(dctx, records.Config{REST: c.As(ns, "corral-server"), Namespace: ns, ServerID: "rbac"})
	if err != nil {
		t.Fatal(err)
	}
	defer recs.Close()
	now := time.Now().UTC()
	sb := &sandbox.Sandbox{ID: randID(), Tenant: "t", CreatedAt: now, UpdatedAt: now, Driver: Name,
		Status: sandbox.Status{State: sandbox.StatePending, LastTransitionAt: now}}
	idem := &sandbox.Idempotency{Tenant: "t", Key: "k", SandboxID: sb.ID, CreatedAt: now}
	if _, err := recs.InsertSandbox(ctx, sb, idem, nil); err != nil {
		t.Fatal(err)
	}
	sb.Status.State = sandbox.StateRunning
	if err := recs.UpdateSandbox(ctx, sb, &sandbox.Event{Type: "started"}); err != nil {
		t.Fatal(err)
	}
	if evs, err := recs.Events(ctx, sb.ID, 0, 0, ""); err != nil || len(evs) != 1 {
		t.Errorf("events = %v, %v", evs, err)
	}
	if got, err := recs.LookupIdempotency(ctx, "t", "k"); err != nil || got.SandboxID != sb.ID {
		t.Errorf("idempotency = %+v, %v", got, err)
	}
	if err := recs.PurgeIdempotency(ctx, now.Add(time.Minute)); err != nil {
		t.Error(err)
	}
	if err := recs.DeleteSandbox(ctx, sb.ID, nil); err != nil {
		t.Error(err)
	}
	// What replicas share besides: the published log, admission claims,
	// quota overrides, templates, webhook subscriptions.
	if err := recs.AppendAudit(ctx, []sandbox.Event{{Tenant: "t", SandboxID: sb.ID, Type: "app", Kind: api.EventApp}}); err != nil {
		t.Errorf("event log: %v", err)
	}
	if err := recs.Claim(ctx, "t", quota.Claim{ID: sb.ID, At: now}, func([]quota.Claim) error { return nil }); err != nil {
		t.Errorf("claim: %v", err)
	}
	if err := recs.Unclaim(ctx, "t", sb.ID); err != nil {
		t.Errorf("unclaim: %v", err)
	}
	rcfg := records.Config{REST: c.As(ns, "corral-server"), Namespace: ns, ServerID: "rbac"}
	qs, err := records.NewQuotas(dctx, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer qs.Close()
	if err := qs.PutQuota(ctx, "t", quota.Overrides{}); err != nil {
		t.Errorf("quota: %v", err)
	}
	ts, err := records.NewTemplates(dctx, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	if _, err := ts.PutTemplate(ctx, &template.Template{Tenant: "t", Name: "x", Spec: []byte(`{}`)}); err != nil {
		t.Errorf("template: %v", err)
	}
	if err := ts.DeleteTemplate(ctx, "t", "x"); err != nil {
		t.Errorf("template delete: %v", err)
	}
	hooks, err := records.NewWebhooks(dctx, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer hooks.Close()
	if err := hooks.InsertWebhook(ctx, &webhook.Webhook{ID: "w", Tenant: "t"}); err != nil {
		t.Errorf("webhook: %v", err)
	}
	if err := hooks.Enqueue(ctx, "w", nil, 1); err != nil {
		t.Errorf("webhook enqueue: %v", err)
	}
	if err := hooks.DeleteWebhook(ctx, "t", "w"); err != nil {
		t.Errorf("webhook delete: %v", err)
	}
	// A template's warm pool: a SandboxPool written, then deleted.
	d.SetPool("template:t/x", driver.Spec{Image: driver.Image{URI: image}}, 1)
	var pools v1alpha1.SandboxPoolList
	if err := c.Client.List(ctx, &pools, client.InNamespace(ns), client.HasLabels{"corral.dev/template-pool"}); err != nil || len(pools.Items) != 1 {
		t.Errorf("the template's pool = %d, %v", len(pools.Items), err)
	}
	d.SetPool("template:t/x", driver.Spec{Image: driver.Image{URI: image}}, 2)
	d.SetPool("template:t/x", driver.Spec{}, 0)
	if err := c.Client.List(ctx, &pools, client.InNamespace(ns), client.HasLabels{"corral.dev/template-pool"}); err != nil || len(pools.Items) != 0 {
		t.Errorf("the template's pool after 0 = %d, %v", len(pools.Items), err)
	}
}
