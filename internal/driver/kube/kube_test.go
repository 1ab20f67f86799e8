// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/drivertest"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/kube/controller"
	"github.com/corral-dev/corral/internal/kube/kubetest"
	"github.com/corral-dev/corral/internal/testutil"
)

var corralBin string

func TestMain(m *testing.M) { os.Exit(testutil.RunWithCorral(m, &corralBin)) }

// world is a namespace of the test cluster with the controller running
// for it.
type world struct {
	c         *kubetest.Cluster
	ns, image string
}

func newWorld(t *testing.T) world {
	c := kubetest.RequireKube(t)
	w := world{c: c, ns: c.Namespace(t), image: c.Busybox(t)}
	c.RunController(t, controller.Config{
		Namespace: w.ns, CorralImage: c.CorralImage(t, corralBin), CorralImagePullPolicy: corev1.PullNever,
	})
	return w
}

func (w world) driver(t *testing.T) *Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := New(ctx, Config{REST: w.c.REST, Namespace: w.ns, ImagePullPolicy: corev1.PullNever})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestConformance(t *testing.T) {
	w := newWorld(t)
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver { return w.driver(t) },
		Spec: func(*testing.T) driver.Spec {
			return driver.Spec{Image: driver.Image{URI: w.image}, Entrypoint: []string{"sleep", "3600"},
				Labels: map[string]string{"team": "a", "free text": "not a label value!"}}
		},
		ExitSpec: func(_ *testing.T, code int) driver.Spec {
			return driver.Spec{Image: driver.Image{URI: w.image}, Entrypoint: []string{"sh", "-c", fmt.Sprintf("sleep 0.5; exit %d", code)}}
		},
		Kill: func(t *testing.T, id string) {
			sbx := &v1alpha1.Sandbox{}
			sbx.Name, sbx.Namespace = id, w.ns
			if err := w.c.Client.Delete(context.Background(), sbx); err != nil {
				t.Fatalf("delete Sandbox %s: %v", id, err)
			}
		},
	})
	// Beyond the suite's check of the Sandboxes: no pod or Secret is left.
	testutil.WaitFor(t, time.Minute, "the sandboxes' pods and secrets to be removed", func() bool {
		var pods corev1.PodList
		var secs corev1.SecretList
		ctx := context.Background()
		if err := w.c.Client.List(ctx, &pods, client.InNamespace(w.ns)); err != nil {
			t.Fatal(err)
		}
		if err := w.c.Client.List(ctx, &secs, client.InNamespace(w.ns), client.MatchingLabels{driver.LabelManaged: "true"}); err != nil {
			t.Fatal(err)
		}
		return len(pods.Items) == 0 && len(secs.Items) == 0
	})
}
