// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/errdefs"
	"github.com/corral-dev/corral/internal/driver"
	"github.com/corral-dev/corral/internal/driver/drivertest"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/kube/controller"
	"github.com/corral-dev/corral/internal/kube/kubetest"
	"github.com/corral-dev/corral/internal/sandbox"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/corraltest"
)

var corralBin string

// The package's tests end every goroutine they start.
func TestMain(m *testing.M) { os.Exit(kubetest.NoLeaks(corraltest.RunWithCorral(m, &corralBin))) }

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

// driver is a kube driver for the world's namespace; endpoints are pod
// addresses (this host is the node) unless the test asks otherwise.
func (w world) driver(t *testing.T, endpoints ...string) *Driver {
	t.Helper()
	ep := EndpointsPod
	if len(endpoints) > 0 {
		ep = endpoints[0]
	}
	return w.driverWith(t, Config{Endpoints: ep})
}

// driverWith is a kube driver for the world's namespace configured by cfg.
func (w world) driverWith(t *testing.T, cfg Config) *Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg.REST, cfg.Namespace, cfg.ImagePullPolicy = w.c.REST, w.ns, corev1.PullNever
	d, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestConformance(t *testing.T) {
	w := newWorld(t)
	// The suite runs with port-forwarded endpoints, as a server outside
	// the cluster uses them; the other tests use pod addresses.
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver { return w.driver(t, EndpointsPortForward) },
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
		// A host path would be a node's.
		NoHostVolumes: true,
	})
	// Beyond the suite's check of the Sandboxes: no pod, Secret or claim
	// is left.
	testutil.WaitFor(t, time.Minute, "the sandboxes' pods, secrets and claims to be removed", func() bool {
		var pods corev1.PodList
		var secs corev1.SecretList
		var pvcs corev1.PersistentVolumeClaimList
		ctx := context.Background()
		if err := w.c.Client.List(ctx, &pvcs, client.InNamespace(w.ns)); err != nil || len(pvcs.Items) > 0 {
			return false
		}
		if err := w.c.Client.List(ctx, &pods, client.InNamespace(w.ns)); err != nil {
			t.Fatal(err)
		}
		if err := w.c.Client.List(ctx, &secs, client.InNamespace(w.ns), client.MatchingLabels{sandbox.LabelManaged: "true"}); err != nil {
			t.Fatal(err)
		}
		return len(pods.Items) == 0 && len(secs.Items) == 0
	})
}

// TestExpiryDeletesTheSandbox: the expiry given at create and moved by
// SetExpiry is the Sandbox's expireTime, and the controller deletes the
// Sandbox, and with it the pod, when it passes.
func TestExpiryDeletesTheSandbox(t *testing.T) {
	w := newWorld(t)
	d := w.driver(t)
	ctx := context.Background()
	spec := driver.Spec{ID: "exp" + randID(), Image: driver.Image{URI: w.image}, Entrypoint: []string{"sleep", "3600"},
		ExpiresAt: time.Now().Add(time.Hour)}
	t.Cleanup(func() { _ = d.Destroy(context.Background(), spec.ID) })
	if _, err := d.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	sbx, err := d.get(ctx, spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	// expireTime keeps whole seconds, rounded up: never before the expiry.
	if want := spec.ExpiresAt.Add(time.Second - 1).Truncate(time.Second); sbx.Spec.ExpireTime == nil || !sbx.Spec.ExpireTime.Time.Equal(want) {
		t.Fatalf("expireTime = %v, want %v", sbx.Spec.ExpireTime, want)
	}
	// Renews are ordered by the record's revision (not by arrival, nor by
	// the clocks of the servers that made them): an older one arriving
	// last changes nothing.
	later, earlier := time.Now(), time.Now().Add(-time.Second)
	if err := d.SetExpiry(ctx, spec.ID, time.Now().Add(3*time.Hour), driver.Change{Version: "20", At: earlier}); err != nil {
		t.Fatal(err)
	}
	if err := d.SetExpiry(ctx, spec.ID, time.Now().Add(5*time.Hour), driver.Change{Version: "19", At: later}); err != nil {
		t.Fatal(err)
	}
	fresh := &v1alpha1.Sandbox{}
	if err := w.c.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: spec.ID}, fresh); err != nil {
		t.Fatal(err)
	}
	if got := fresh.Spec.ExpireTime.Time; got.After(time.Now().Add(4 * time.Hour)) {
		t.Errorf("an older renew arriving last won: expireTime %v", got)
	}
	at := time.Now().Add(2 * time.Second)
	if err := d.SetExpiry(ctx, spec.ID, at, driver.Change{At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "the expired sandbox and its pod to be deleted", func() bool {
		var pod corev1.Pod
		err := w.c.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: spec.ID}, &pod)
		_, ierr := d.Inspect(ctx, spec.ID)
		return apierrors.IsNotFound(err) && errors.Is(ierr, errdefs.ErrNotFound)
	})
	if time.Now().Before(at) {
		t.Fatalf("deleted before its expiry")
	}
	if err := d.SetExpiry(ctx, spec.ID, time.Now().Add(time.Hour), driver.Change{At: time.Now()}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("SetExpiry of a deleted sandbox = %v, want ErrNotFound", err)
	}
}

// TestStartFailuresAreExplained: what keeps a sandbox from starting comes
// back from Create as an error naming the cause, and nothing is left.
func TestStartFailuresAreExplained(t *testing.T) {
	w := newWorld(t)
	d := w.driver(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		spec driver.Spec
		kind error
		want string
	}{
		{"image not on the node", driver.Spec{Image: driver.Image{URI: "corral.test/absent:1"}, Entrypoint: []string{"sleep", "1"}},
			errdefs.ErrInvalidArgument, "ImageNotPresent"},
		{"entrypoint exits", driver.Spec{Image: driver.Image{URI: w.image}, Entrypoint: []string{"sh", "-c", "exit 7"}},
			errdefs.ErrInvalidArgument, "exited with code 7"},
		{"entrypoint missing", driver.Spec{Image: driver.Image{URI: w.image}, Entrypoint: []string{"/no/such/program"}},
			errdefs.ErrInvalidArgument, "before it was ready"},
		{"no entrypoint", driver.Spec{Image: driver.Image{URI: w.image}}, errdefs.ErrInvalidArgument, "entrypoint is empty"},
		{"credential vault", driver.Spec{Image: driver.Image{URI: w.image}, Entrypoint: []string{"sleep", "1"}, NetworkPolicy: []byte(`{}`),
			EgressToken: "t", CredentialProxy: true}, errdefs.ErrNotImplemented, "credential vault"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.ID = "fail" + randID()
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			_, err := d.Create(cctx, tc.spec)
			if err == nil && tc.name == "entrypoint exits" {
				// execd answered before the entrypoint's exit was seen (a
				// loaded node): the sandbox is created, and the exit is
				// what it reports next, never lost.
				t.Cleanup(func() { _ = d.Destroy(context.Background(), tc.spec.ID) })
				var st driver.Status
				testutil.WaitFor(t, time.Minute, "the exit of an entrypoint that exited after start", func() bool {
					st, err = d.Inspect(cctx, tc.spec.ID)
					return err == nil && st.Phase == driver.PhaseExited
				})
				if st.Exit == nil || st.Exit.Code != 7 {
					t.Fatalf("the entrypoint exited with %+v, want code 7", st.Exit)
				}
				return
			}
			if !errors.Is(err, tc.kind) || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Create = %v, want %v mentioning %q", err, tc.kind, tc.want)
			}
			var sbx v1alpha1.Sandbox
			if err := w.c.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: tc.spec.ID}, &sbx); !apierrors.IsNotFound(err) {
				t.Fatalf("a failed Create left its Sandbox: %v", err)
			}
		})
	}
}

func randID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestWarmPool: a SandboxPool keeps started pods; creates of its image
// adopt them (no pod of their own), get their own token, environment and
// entrypoint, the pool's token stops working in an adopted pod, and the
// pool starts replacements. Deleting the pool removes its warm pods.
func TestWarmPool(t *testing.T) {
	w := newWorld(t)
	d := w.driver(t)
	ctx := context.Background()
	pool := &v1alpha1.SandboxPool{
		ObjectMeta: metav1.ObjectMeta{Name: "bb", Namespace: w.ns},
		Spec:       v1alpha1.SandboxPoolSpec{Warm: 2, Template: v1alpha1.SandboxTemplate{Image: w.image, ImagePullPolicy: corev1.PullNever}},
	}
	if err := w.c.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	waitPoolReady(t, d, "bb", 2, time.Minute)
	for i := range 2 {
		spec := driver.Spec{ID: fmt.Sprintf("warm%d", i) + randID(), Image: driver.Image{URI: w.image},
			Entrypoint: []string{"sh", "-c", "echo $GREETING > /tmp/entry; exec sleep 3600"},
			Env:        map[string]string{"GREETING": fmt.Sprintf("hello %d", i)}, ExecdToken: "tok" + randID()}
		t.Cleanup(func() { _ = d.Destroy(context.Background(), spec.ID) })
		start := time.Now()
		if _, err := d.Create(ctx, spec); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		sbx, _ := d.get(ctx, spec.ID)
		if !strings.HasPrefix(sbx.Status.PodName, "bb-") {
			t.Fatalf("sandbox %d runs in pod %q, not one of the pool's", i, sbx.Status.PodName)
		}
		t.Logf("create from the pool took %v", took)
		ep, err := d.Endpoint(ctx, spec.ID, insandbox.ExecdPort)
		if err != nil {
			t.Fatal(err)
		}
		// The adoption starts the entrypoint; it runs beside execd, so
		// its first line may come a moment after the create returns.
		out, code := kubetest.Exec(t, ep.String(), spec.ExecdToken,
			"echo $GREETING; for i in $(seq 100); do [ -s /tmp/entry ] && break; sleep 0.1; done; cat /tmp/entry")
		if want := fmt.Sprintf("hello %d\nhello %d\n", i, i); code != 0 || out != want {
			t.Errorf("command in the adopted pod = %q (exit %d), want %q", out, code, want)
		}
		// The sandbox can read the token its PID 1 was started with (a
		// warm pod's); that token must open neither this pod nor any other
		// of the pool.
		leak, code := kubetest.Exec(t, ep.String(), spec.ExecdToken, "tr '\\0' '\\n' < /proc/1/environ | grep ^EXECD_ACCESS_TOKEN= | cut -d= -f2-")
		leaked := strings.TrimSpace(leak)
		if code != 0 || len(leaked) < 32 {
			t.Fatalf("reading PID 1's token inside the sandbox: %q (exit %d)", leak, code)
		}
		if out, code := kubetest.Exec(t, ep.String(), leaked, "true"); code != -1 {
			t.Errorf("the warm token still works in the adopted pod: %q %d", out, code)
		}
		var pool corev1.PodList
		if err := w.c.Client.List(ctx, &pool, client.InNamespace(w.ns), client.MatchingLabels{controller.LabelPool: "bb"}); err != nil {
			t.Fatal(err)
		}
		for _, p := range pool.Items {
			if p.Status.PodIP == "" {
				continue
			}
			if out, code := kubetest.Exec(t, net.JoinHostPort(p.Status.PodIP, "44772"), leaked, "id"); code != -1 {
				t.Errorf("a token leaked from an adopted sandbox runs commands in warm pod %s: %q %d", p.Name, out, code)
			}
		}
		var pod corev1.Pod
		if err := w.c.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: sbx.Status.PodName}, &pod); err != nil {
			t.Fatal(err)
		}
		if !metav1.IsControlledBy(&pod, sbx) || pod.Labels[controller.LabelPool] != "" || pod.Labels[sandbox.LabelSandboxID] != spec.ID {
			t.Errorf("adopted pod: owners %v, labels %v", pod.OwnerReferences, pod.Labels)
		}
	}
	waitPoolReady(t, d, "bb", 2, time.Minute) // replacements

	// Deleting an adopted sandbox removes its pod; deleting the pool
	// removes the warm ones.
	if err := w.c.Client.Delete(ctx, pool, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the pool's pods to be deleted", func() bool {
		var pods corev1.PodList
		_ = w.c.Client.List(ctx, &pods, client.InNamespace(w.ns), client.HasLabels{controller.LabelPool})
		return len(pods.Items) == 0
	})
}

// TestPortForwardEndpoints: outside the cluster, a sandbox's port is a
// loopback listener tunnelled through the API server; it serves execd, and
// it is closed when the sandbox is deleted.
func TestPortForwardEndpoints(t *testing.T) {
	w := newWorld(t)
	d := w.driver(t, EndpointsPortForward)
	ctx := context.Background()
	spec := driver.Spec{ID: "pf" + randID(), Image: driver.Image{URI: w.image}, Entrypoint: []string{"sleep", "3600"}, ExecdToken: randID()}
	t.Cleanup(func() { _ = d.Destroy(context.Background(), spec.ID) })
	if _, err := d.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	ep, err := d.Endpoint(ctx, spec.ID, insandbox.ExecdPort)
	if err != nil {
		t.Fatal(err)
	}
	if !ep.Addr().IsLoopback() {
		t.Fatalf("endpoint %v is not on loopback", ep)
	}
	if again, _ := d.Endpoint(ctx, spec.ID, insandbox.ExecdPort); again != ep {
		t.Errorf("a second Endpoint made another forward: %v, then %v", ep, again)
	}
	if out, code := kubetest.Exec(t, ep.String(), spec.ExecdToken, "echo through the API server"); code != 0 || out != "through the API server\n" {
		t.Errorf("command = %q, %d", out, code)
	}
	if err := d.Destroy(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", ep.String(), time.Second); err == nil {
		c.Close()
		t.Errorf("the forward of a deleted sandbox still listens on %v", ep)
	}
}

// TestLeaderElection: two controllers with leader election share the
// work of one; when the leader stops, the other takes over and sandboxes
// still start.
func TestLeaderElection(t *testing.T) {
	c := kubetest.RequireKube(t)
	ns := c.Namespace(t)
	image := c.Busybox(t)
	cfg := controller.Config{Namespace: ns, CorralImage: c.CorralImage(t, corralBin), CorralImagePullPolicy: corev1.PullNever,
		LeaderElection: true, LeaseDuration: 3 * time.Second}
	stops := []func(){c.RunController(t, cfg), c.RunController(t, cfg)}
	w := world{c: c, ns: ns, image: image}
	d := w.driver(t)
	ctx := context.Background()
	holder := func() string {
		var l coordinationv1.Lease
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "corral-controller"}, &l); err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	create := func() {
		t.Helper()
		spec := driver.Spec{ID: "le" + randID(), Image: driver.Image{URI: image}, Entrypoint: []string{"sleep", "3600"}}
		t.Cleanup(func() { _ = d.Destroy(context.Background(), spec.ID) })
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if _, err := d.Create(cctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	create()
	first := holder()
	if first == "" {
		t.Fatal("no controller holds the lease")
	}
	// Stop one replica. If it led, the other takes over at once (a clean
	// stop gives the lease up); if not, stop the leader too and start a
	// fresh replica. Either way a replica that did not lead before must
	// lead now, and sandboxes must still start.
	stops[0]()
	time.Sleep(time.Second)
	if holder() == first {
		stops[1]()
		c.RunController(t, cfg)
	}
	testutil.WaitFor(t, 30*time.Second, "another replica to lead", func() bool { h := holder(); return h != "" && h != first })
	create()
}

// TestServersSharingANamespaceSeeOnlyTheirOwn: with server IDs, a server
// lists and recovers only the sandboxes it made, so its orphan sweep never
// deletes another server's.
func TestServersSharingANamespaceSeeOnlyTheirOwn(t *testing.T) {
	w := newWorld(t)
	a := w.driverWith(t, Config{Endpoints: EndpointsPod, ServerID: "server-a"})
	b := w.driverWith(t, Config{Endpoints: EndpointsPod, ServerID: "server-b"})
	ctx := context.Background()
	spec := driver.Spec{ID: "own" + randID(), Image: driver.Image{URI: w.image}, Entrypoint: []string{"sleep", "3600"}}
	t.Cleanup(func() { _ = a.Destroy(context.Background(), spec.ID) })
	h, err := a.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]*Driver{"a": a, "b": b} {
		ls, err := d.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if found := len(ls) == 1 && ls[0].ID == spec.ID; found != (name == "a") {
			t.Errorf("server %s lists %+v", name, ls)
		}
	}
	if err := b.Recover(ctx, h); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another server's Recover = %v, want ErrNotFound", err)
	}
	if _, err := b.Inspect(ctx, spec.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another server's Inspect = %v, want ErrNotFound", err)
	}
}

// waitPoolReady waits until d's cache shows ready pods in pool name: the
// count its creates see when they pick a pool.
// TestWarmPoolHandsOverSecretEnv: a Sandbox written by hand whose env
// comes from a Secret key (one of them optional and missing) and the
// pod's name still adopts a warm pod; the controller reads the values at
// the hand-over.
func TestWarmPoolHandsOverSecretEnv(t *testing.T) {
	w := newWorld(t)
	d := w.driver(t)
	ctx := context.Background()
	pool := &v1alpha1.SandboxPool{
		ObjectMeta: metav1.ObjectMeta{Name: "env", Namespace: w.ns},
		Spec:       v1alpha1.SandboxPoolSpec{Warm: 1, Template: v1alpha1.SandboxTemplate{Image: w.image, ImagePullPolicy: corev1.PullNever}},
	}
	app := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: w.ns}, Data: map[string][]byte{"token": []byte("s3cr3t-value")}}
	for _, o := range []client.Object{pool, app} {
		if err := w.c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitPoolReady(t, d, "env", 1, time.Minute)
	id := "henv" + randID()
	token := "tok" + randID()
	access := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "acc-" + id, Namespace: w.ns}, Data: map[string][]byte{v1alpha1.TokenKey: []byte(token)}}
	if err := w.c.Client.Create(ctx, access); err != nil {
		t.Fatal(err)
	}
	sbx := &v1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: w.ns}, Spec: v1alpha1.SandboxSpec{
		Image: w.image, ImagePullPolicy: corev1.PullNever, Entrypoint: []string{"sleep", "3600"}, AccessSecretName: access.Name, PoolRef: "env",
		Env: []corev1.EnvVar{
			{Name: "PLAIN", Value: "p"},
			{Name: "API_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "token"}}},
			{Name: "MISSING_OK", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "nope", Optional: new(true)}}},
			{Name: "MY_POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		},
	}}
	if err := w.c.Client.Create(ctx, sbx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Destroy(context.Background(), id) })
	var got v1alpha1.Sandbox
	testutil.WaitFor(t, time.Minute, "the Sandbox to run", func() bool {
		err := w.c.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: id}, &got)
		return err == nil && got.Status.Phase == v1alpha1.SandboxRunning && got.Status.PodIP != ""
	})
	if !strings.HasPrefix(got.Status.PodName, "env-") {
		t.Fatalf("the Sandbox runs in %q, not an adopted pod of the pool", got.Status.PodName)
	}
	out, code := kubetest.Exec(t, net.JoinHostPort(got.Status.PodIP, "44772"), token, "echo $PLAIN $API_TOKEN ${MISSING_OK:-unset} $MY_POD")
	if want := "p s3cr3t-value unset " + got.Status.PodName + "\n"; code != 0 || out != want {
		t.Errorf("env in the adopted pod = %q (exit %d), want %q", out, code, want)
	}
}

func waitPoolReady(t testing.TB, d *Driver, name string, ready int32, timeout time.Duration) {
	t.Helper()
	testutil.WaitFor(t, timeout, fmt.Sprintf("pool %s to have %d ready pods", name, ready), func() bool {
		var p v1alpha1.SandboxPool
		err := d.c.Get(context.Background(), client.ObjectKey{Namespace: d.cfg.Namespace, Name: name}, &p)
		return err == nil && p.Status.Ready == ready
	})
}

// TestFenceOrder: renews are ordered by record revision when both have
// one, by time when neither has, and a missing fence never wins.
func TestFenceOrder(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		prev, next driver.Change
		none       bool // no previous fence
		want       bool
	}{
		{prev: driver.Change{Version: "9"}, next: driver.Change{Version: "10"}, want: true},
		{prev: driver.Change{Version: "10", At: t0}, next: driver.Change{Version: "9", At: t0.Add(time.Hour)}, want: false},
		{prev: driver.Change{Version: "10"}, next: driver.Change{Version: "10"}, want: false},
		{prev: driver.Change{At: t0}, next: driver.Change{At: t0.Add(time.Millisecond)}, want: true},
		{prev: driver.Change{At: t0.Add(time.Second)}, next: driver.Change{At: t0}, want: false},
		{none: true, next: driver.Change{Version: "1"}, want: true},
		{prev: driver.Change{At: t0}, next: driver.Change{Version: "1"}, want: true},
	} {
		prev := changeFence(tc.prev)
		if tc.none {
			prev = ""
		}
		if got := fenceBefore(prev, changeFence(tc.next)); got != tc.want {
			t.Errorf("%+v before %+v = %v, want %v", tc.prev, tc.next, got, tc.want)
		}
	}
}
