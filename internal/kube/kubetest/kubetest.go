// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package kubetest is the Kubernetes tier of the tests: RequireKube finds
// the single-node cluster that scripts/k8s.sh started (and fails when
// CORRAL_TEST_KUBE=1 but none runs), images are imported into the node's
// containerd (nothing can be pulled here), the CRDs are installed from
// deploy/kubernetes/crd, each test gets a namespace of its own, and the
// controller runs in the test process. Only _test.go files import it.
package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/kube/controller"
	"github.com/corral-dev/corral/internal/testutil"
	"github.com/corral-dev/corral/internal/testutil/registry"
	"github.com/corral-dev/corral/sse"
)

// DefaultEnvFile is where scripts/k8s.sh up writes the cluster's settings.
const DefaultEnvFile = "/var/lib/corral-k8s/env"

// NodeAddress is the test node's address on the pod bridge
// (scripts/k8s.sh): the host, as pods reach it. Tests serve what pods
// must reach there; nothing leaves the machine.
const NodeAddress = "10.88.0.1"

// Cluster is the running test cluster.
type Cluster struct {
	REST       *rest.Config
	Client     client.Client
	Containerd string // the node's containerd socket
	Kubeconfig string
}

var (
	clusterOnce sync.Once
	cluster     *Cluster
	clusterErr  error
)

// RequireKube skips unless CORRAL_TEST_KUBE=1; when it is set, the test
// fails if the cluster of scripts/k8s.sh does not answer. The CRDs are
// installed (or updated) once per test binary.
func RequireKube(t testing.TB) *Cluster {
	t.Helper()
	if os.Getenv(testutil.EnvKube) != "1" {
		t.Skipf("kube tier: run scripts/k8s.sh up and set %s=1 to run", testutil.EnvKube)
	}
	clusterOnce.Do(func() {
		// client-go and controller-runtime log through globals; tests
		// keep their warnings and drop the rest.
		ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		cluster, clusterErr = connect(testutil.ModuleRoot(t))
	})
	if clusterErr != nil {
		t.Fatalf("%s=1 but the test cluster cannot be used (scripts/k8s.sh up): %v", testutil.EnvKube, clusterErr)
	}
	return cluster
}

// VerifyTestMain is testutil.VerifyTestMain for a package of the kube
// tier.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) { os.Exit(NoLeaks(m.Run(), opts...)) }

// NoLeaks is testutil.NoLeaks for a package of the kube tier. client-go
// keeps one transport per client configuration for the whole process, and
// the cluster's is shared by every test, so its idle connections (each an
// HTTP/2 read loop) are closed first, and so are those Exec left in the
// default client's pool (an HTTP/1 read loop each, seen in CI when a
// port-forward outlived its last command): what is left after that is a
// goroutine a test did not end.
func NoLeaks(code int, opts ...goleak.Option) int {
	if cluster != nil {
		if rt, err := rest.TransportFor(cluster.REST); err == nil {
			utilnet.CloseIdleConnectionsFor(rt)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	return testutil.NoLeaks(code, opts...)
}

func connect(root string) (*Cluster, error) {
	file := os.Getenv("CORRAL_TEST_KUBE_ENV")
	if file == "" {
		file = DefaultEnvFile
	}
	env, err := readEnv(file)
	if err != nil {
		return nil, err
	}
	// A pod whose network namespace was mounted under /run/netns before
	// that was a mount point of its own never goes away once something
	// makes it one (the first `ip netns add`); scripts/k8s.sh up makes it
	// one before containerd starts.
	if ok, err := isMountPoint("/run/netns"); err != nil || !ok {
		return nil, fmt.Errorf("/run/netns is not a mount point (%v): start the cluster with this checkout's scripts/k8s.sh up", err)
	}
	c := &Cluster{Kubeconfig: env["KUBECONFIG"], Containerd: env["CORRAL_TEST_KUBE_CONTAINERD"]}
	if c.REST, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return nil, err
	}
	c.REST.QPS, c.REST.Burst = 200, 400
	// client-go watches a client certificate given as files for rotation,
	// with goroutines that live as long as the process; given as data, it
	// starts none, and the leak checks see only what the tests start.
	if c.REST.CertFile != "" && c.REST.KeyFile != "" {
		if c.REST.CertData, err = os.ReadFile(c.REST.CertFile); err != nil {
			return nil, err
		}
		if c.REST.KeyData, err = os.ReadFile(c.REST.KeyFile); err != nil {
			return nil, err
		}
		c.REST.CertFile, c.REST.KeyFile = "", ""
	}
	scheme, err := v1alpha1.Scheme()
	if err != nil {
		return nil, err
	}
	if err := rbacv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if c.Client, err = client.New(c.REST, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c, c.installCRDs(ctx, filepath.Join(root, "deploy", "kubernetes", "crd"))
}

// isMountPoint reports whether dir is a mount point in this process's
// mount namespace.
func isMountPoint(dir string) (bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true, nil
		}
	}
	return false, nil
}

func readEnv(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	return env, sc.Err()
}

// Manifests reads the objects of a multi-document YAML file.
func Manifests(file string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(string(b), "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out, nil
}

// Apply creates or updates obj (server-side apply).
func (c *Cluster) Apply(ctx context.Context, obj *unstructured.Unstructured) error {
	return c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("corral-tests"), client.ForceOwnership)
}

// installCRDs applies every manifest in dir and waits until each CRD is
// established.
func (c *Cluster) installCRDs(ctx context.Context, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRD manifests in %s: %v", dir, err)
	}
	for _, f := range files {
		objs, err := Manifests(f)
		if err != nil || len(objs) != 1 {
			return fmt.Errorf("%s: want one CRD: %v", f, err)
		}
		u := objs[0]
		if err := c.Apply(ctx, u); err != nil {
			return fmt.Errorf("apply %s: %w", f, err)
		}
		for {
			var got unstructured.Unstructured
			got.SetGroupVersionKind(u.GroupVersionKind())
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(u), &got); err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			if established(conds) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s not established: %w", u.GetName(), ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func established(conds []any) bool {
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// Namespace creates a namespace for one test and deletes it after.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "corral-test-"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Client.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if t.Failed() {
			c.explain(ctx, t, ns.Name)
		}
		if err := c.Client.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	// Pods are refused until the namespace's default service account
	// exists.
	testutil.WaitFor(t, 30*time.Second, "the default service account of "+ns.Name, func() bool {
		var sa corev1.ServiceAccount
		return c.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &sa) == nil
	})
	return ns.Name
}

// explain logs, for a failed test, what is left in its namespace: each
// pod's phase, deletion, conditions and containers, the namespace's
// events, and what kubelet logged about those pods, so a pod that would
// not go away says why.
func (c *Cluster) explain(ctx context.Context, t testing.TB, ns string) {
	var pods corev1.PodList
	if err := c.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Logf("explain %s: list pods: %v", ns, err)
		return
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
		st, _ := json.Marshal(p.Status)
		t.Logf("pod %s/%s: deletion %v (grace %v), finalizers %v, node %q, status %s",
			ns, p.Name, p.DeletionTimestamp, p.DeletionGracePeriodSeconds, p.Finalizers, p.Spec.NodeName, st)
	}
	// The Sandboxes last, after the kubelet's lines, so that a log cut to
	// its tail still says why each sandbox is where it is.
	defer func() {
		var sbxs v1alpha1.SandboxList
		if err := c.Client.List(ctx, &sbxs, client.InNamespace(ns)); err != nil {
			t.Logf("explain %s: list sandboxes: %v", ns, err)
			return
		}
		for _, s := range sbxs.Items {
			var conds []string
			for _, cd := range s.Status.Conditions {
				conds = append(conds, fmt.Sprintf("%s=%s (%s: %s)", cd.Type, cd.Status, cd.Reason, cd.Message))
			}
			t.Logf("sandbox %s/%s: phase %s, pod %q, deletion %v, conditions %s", ns, s.Name, s.Status.Phase, s.Status.PodName,
				s.DeletionTimestamp, strings.Join(conds, "; "))
		}
	}()
	var evs corev1.EventList
	if err := c.Client.List(ctx, &evs, client.InNamespace(ns)); err == nil {
		for _, e := range evs.Items {
			t.Logf("event %s %s/%s: %s %s (x%d, last %v)", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name,
				e.Reason, e.Message, e.Count, e.LastTimestamp)
		}
	}
	if len(names) == 0 {
		return
	}
	// scripts/k8s.sh keeps kubelet's log beside the kubeconfig.
	f, err := os.Open(filepath.Join(filepath.Dir(c.Kubeconfig), "log", "kubelet.log"))
	if err != nil {
		t.Logf("explain %s: %v", ns, err)
		return
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for _, n := range names {
			if strings.Contains(sc.Text(), n) {
				lines = append(lines, sc.Text())
				break
			}
		}
	}
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	t.Logf("kubelet on those pods (last %d lines):\n%s", len(lines), strings.Join(lines, "\n"))
}

// Import loads img into the node's containerd under ref.
func (c *Cluster) Import(t testing.TB, ref string, img v1.Image) {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tarball.Write(tag, img, &buf); err != nil {
		t.Fatalf("image %s: %v", ref, err)
	}
	cmd := exec.Command("ctr", "-a", c.Containerd, "-n", "k8s.io", "images", "import", "-")
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ctr images import %s: %v\n%s", ref, err, out)
	}
}

// Image is a single-layer image of the tar layer with the given
// entrypoint and PATH=/bin.
func Image(t testing.TB, layer []byte, entrypoint ...string) v1.Image {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint = entrypoint
	cf.Config.Env = []string{"PATH=/bin"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// Busybox imports the busybox test image and returns its reference.
func (c *Cluster) Busybox(t testing.TB) string {
	t.Helper()
	layer, err := registry.BusyboxLayer()
	if err != nil {
		t.Fatal(err)
	}
	const ref = "corral.test/busybox:1"
	c.Import(t, ref, Image(t, layer, "/bin/sh"))
	return ref
}

// CorralImage imports an image whose /corral is the corral binary bin,
// as the controller's init container expects, and returns its reference.
func (c *Cluster) CorralImage(t testing.TB, bin string) string {
	t.Helper()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	layer, err := registry.TarOf(map[string][]byte{"corral": b})
	if err != nil {
		t.Fatal(err)
	}
	const ref = "corral.test/corral:dev"
	c.Import(t, ref, Image(t, layer, insandbox.ImageBinary))
	return ref
}

// As is the cluster's client configuration acting as service account sa
// of namespace ns (impersonation), to prove what its RBAC allows.
func (c *Cluster) As(ns, sa string) *rest.Config {
	rc := rest.CopyConfig(c.REST)
	rc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	return rc
}

// RunController runs the controller in the test process until the test
// ends.
func (c *Cluster) RunController(t testing.TB, cfg controller.Config) (stop func()) {
	t.Helper()
	return c.RunControllerAs(t, c.REST, cfg)
}

// RunControllerAs runs the controller with client configuration rc until
// the test ends or the returned stop is called (it waits for the
// controller to finish; calling it twice is fine).
func (c *Cluster) RunControllerAs(t testing.TB, rc *rest.Config, cfg controller.Config) (stop func()) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	mgr, err := controller.NewManager(rc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("controller: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Exec runs command through the execd at addr with token and returns its
// output (stdout and stderr, line by line) and exit code; code is -1 with
// the HTTP status if execd refused.
func Exec(t testing.TB, addr, token, command string) (out string, code int) {
	t.Helper()
	body, _ := json.Marshal(api.RunCommandRequest{Command: command})
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/command", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(api.HeaderExecdToken, token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("execd at %s: %v", addr, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return res.Status, -1
	}
	var b strings.Builder
	rd := sse.NewReader(res.Body)
	for {
		raw, err := rd.Next()
		if err != nil {
			t.Fatalf("execd at %s: stream: %v", addr, err)
		}
		var ev api.ServerStreamEvent
		_ = json.Unmarshal(raw, &ev)
		switch ev.Type {
		case api.EventStdout, api.EventStderr:
			b.WriteString(ev.Text + "\n") // one event per line
		case api.EventExecutionComplete:
			return b.String(), 0
		case api.EventError:
			code, _ := strconv.Atoi(ev.Error.EValue)
			return b.String(), code
		}
	}
}

// PodLogs returns a container's log, or why it could not be read.
func (c *Cluster) PodLogs(ns, pod, container string) string {
	cs, err := kubernetes.NewForConfig(c.REST)
	if err != nil {
		return err.Error()
	}
	b, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
	if err != nil {
		return err.Error()
	}
	return string(b)
}
