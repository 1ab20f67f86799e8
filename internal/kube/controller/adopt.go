// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral/api"
	"github.com/corral-dev/corral/internal/initproc"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/verifier"
	"github.com/corral-dev/corral/sse"
)

// errNoWarmPod means the pool had no ready pod to give.
var errNoWarmPod = errors.New("no warm pod ready")

// errUnauthorized is execd or the egress API refusing a token.
var errUnauthorized = errors.New("the token was refused")

// adoptable reports whether sbx can take a pool pod: everything it adds
// to the template must be something the hand-over can apply. Env values
// from a Secret key or from the pod's name, namespace or IP are read by
// the controller at the hand-over; other sources (ConfigMaps, resources)
// make the Sandbox start a pod of its own.
func adoptable(sbx *v1alpha1.Sandbox) bool {
	if sbx.Spec.PoolRef == "" || sbx.Spec.Stopped {
		return false
	}
	for _, e := range sbx.Spec.Env {
		switch vf := e.ValueFrom; {
		case vf == nil:
			if strings.ContainsAny(e.Value, "\n\x00") {
				return false
			}
		case vf.SecretKeyRef != nil:
		case vf.FieldRef != nil && slices.Contains(handedFields, vf.FieldRef.FieldPath):
		default:
			return false
		}
	}
	return true
}

// handedFields are the pod fields an env var may come from in an adopted
// pod.
var handedFields = []string{"metadata.name", "metadata.namespace", "status.podIP"}

// adoptedEnv is sbx's environment as NAME=value lines for the adopted
// pod: Secret keys read now (past the cache, as the kubelet would), pod
// fields from pod. A value that cannot be handed over is an error, and the
// Sandbox starts a pod of its own.
func (r *sandboxReconciler) adoptedEnv(ctx context.Context, sbx *v1alpha1.Sandbox, pod *corev1.Pod) ([]string, error) {
	var out []string
	for _, e := range sbx.Spec.Env {
		v := e.Value
		switch vf := e.ValueFrom; {
		case vf == nil:
		case vf.SecretKeyRef != nil:
			var sec corev1.Secret
			err := r.api.Get(ctx, types.NamespacedName{Namespace: sbx.Namespace, Name: vf.SecretKeyRef.Name}, &sec)
			b, ok := sec.Data[vf.SecretKeyRef.Key]
			optional := vf.SecretKeyRef.Optional != nil && *vf.SecretKeyRef.Optional
			switch {
			case err == nil && ok:
				v = string(b)
			case optional && (err == nil || apierrors.IsNotFound(err)):
				continue
			case err != nil:
				return nil, fmt.Errorf("env %s: Secret %s: %w", e.Name, vf.SecretKeyRef.Name, err)
			default:
				return nil, fmt.Errorf("env %s: Secret %s has no key %s", e.Name, vf.SecretKeyRef.Name, vf.SecretKeyRef.Key)
			}
		case vf.FieldRef != nil && vf.FieldRef.FieldPath == "metadata.name":
			v = pod.Name
		case vf.FieldRef != nil && vf.FieldRef.FieldPath == "metadata.namespace":
			v = pod.Namespace
		case vf.FieldRef != nil && vf.FieldRef.FieldPath == "status.podIP":
			v = pod.Status.PodIP
		default:
			return nil, fmt.Errorf("env %s: its source cannot be handed over", e.Name)
		}
		if strings.ContainsAny(v, "\n\x00") {
			return nil, fmt.Errorf("env %s: a value with a newline or NUL cannot be handed over", e.Name)
		}
		out = append(out, e.Name+"="+v)
	}
	return out, nil
}

// claim takes a ready pod of sbx's pool: one update, guarded by the pod's
// resourceVersion, moves it from the pool to the Sandbox (labels and
// controller reference), so two claimers never get the same pod and the
// pool starts a replacement at once.
func (r *sandboxReconciler) claim(ctx context.Context, sbx *v1alpha1.Sandbox) (*corev1.Pod, error) {
	var pool v1alpha1.SandboxPool
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: sbx.Namespace, Name: sbx.Spec.PoolRef}, &pool); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errNoWarmPod
		}
		return nil, err
	}
	if !pool.Spec.Template.Matches(sbx) {
		return nil, errNoWarmPod
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(sbx.Namespace), client.MatchingFields{indexPool: pool.Name}); err != nil {
		return nil, err
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	claimable := func(p *corev1.Pod) bool {
		return p.DeletionTimestamp.IsZero() && podReady(p) && p.Status.PodIP != "" && metav1.IsControlledBy(p, &pool)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !claimable(p) {
			continue
		}
		for attempt := 0; ; attempt++ {
			p.Labels = sandboxLabels(sbx)
			p.OwnerReferences = []metav1.OwnerReference{v1alpha1.OwnerRef(sbx, "Sandbox")}
			err := r.client.Update(ctx, p)
			switch {
			case err == nil:
				return p, nil
			case apierrors.IsConflict(err) && attempt == 0:
				// The cache's copy may only be stale (the kubelet writes a
				// starting pod's status): try the newest once, if it is
				// still the pool's and ready.
				var live corev1.Pod
				if gerr := r.api.Get(ctx, client.ObjectKeyFromObject(p), &live); gerr == nil && claimable(&live) {
					p = &live
					continue
				}
			case apierrors.IsConflict(err), apierrors.IsNotFound(err):
				// Another claimer was first.
			default:
				return nil, err
			}
			break
		}
	}
	return nil, errNoWarmPod
}

// adopt hands the claimed pod over to sbx (access is sbx's access
// Secret). If that fails the pod is deleted, and sbx starts one of its
// own: adopted is false.
func (r *sandboxReconciler) adopt(ctx context.Context, sbx *v1alpha1.Sandbox, pod *corev1.Pod, access *corev1.Secret) (adopted bool, err error) {
	err = r.handOver(ctx, sbx, pod, access)
	if err == nil {
		r.events.Eventf(sbx, corev1.EventTypeNormal, "Adopted", "adopted warm pod %s of pool %s", pod.Name, sbx.Spec.PoolRef)
		return true, nil
	}
	r.cfg.Logger.WarnContext(ctx, "adopting a warm pod failed; starting a pod of its own", "namespace", sbx.Namespace,
		"sandbox_id", sbx.Name, "pod", pod.Name, "err", err)
	r.events.Eventf(sbx, corev1.EventTypeWarning, "AdoptionFailed", "handing pod %s over failed (%v); starting a pod of its own", pod.Name, err)
	return false, client.IgnoreNotFound(r.client.Delete(ctx, pod))
}

// handOver runs `corral adopt` in the claimed pod through its execd, with
// the pod's own warm token: the pod gets sbx's token, environment and
// entrypoint. A pod with an egress sidecar first gets sbx's policy and
// egress token, so the entrypoint starts confined. The Sandbox's status
// naming the pod is the mark that it succeeded; until that is written, a
// reconcile hands over again (every step is idempotent).
func (r *sandboxReconciler) handOver(ctx context.Context, sbx *v1alpha1.Sandbox, pod *corev1.Pod, access *corev1.Secret) error {
	var warm corev1.Secret
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: warmSecret(pod.Name)}, &warm); err != nil {
		return fmt.Errorf("the warm pod's token: %w", err)
	}
	if sbx.Spec.Egress != nil {
		egressAddr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(insandbox.EgressPort))
		if err := handOverEgress(ctx, egressAddr, string(warm.Data[v1alpha1.EgressTokenKey]), string(access.Data[v1alpha1.EgressTokenKey]), sbx.Spec.Egress.Policy); err != nil {
			return err
		}
	}
	env, err := r.adoptedEnv(ctx, sbx, pod)
	if err != nil {
		return err
	}
	token := string(access.Data[v1alpha1.TokenKey])
	// The pod gets the token's verifier: nothing in it holds the token.
	a := initproc.Adoption{Token: verifier.Of(token), Args: sbx.Spec.Entrypoint, Env: env}
	spec, _ := json.Marshal(a)
	req := api.RunCommandRequest{
		Command: insandbox.Binary + " adopt --token-file " + warmTokenFile + " --env-file " + warmEnvFile + " --start " + warmStart,
		Envs:    map[string]string{"CORRAL_ADOPT": string(spec)},
	}
	addr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(insandbox.ExecdPort))
	err = runInPod(ctx, addr, string(warm.Data[v1alpha1.TokenKey]), req)
	if errors.Is(err, errUnauthorized) {
		// The warm token no longer works: an earlier reconcile handed the
		// pod over already (its mark not in the cache yet). Running the
		// idempotent hand-over again with the sandbox's token proves it.
		err = runInPod(ctx, addr, token, req)
	}
	return err
}

// handOverEgress sets a warm pod's enforcer to the adopting sandbox's
// policy, then gives its API the sandbox's token. A repeat finds the warm
// token refused and checks the policy with the sandbox's.
func handOverEgress(ctx context.Context, addr, warmToken, token, policy string) error {
	if len(token) < api.EgressTokenMinLen {
		return fmt.Errorf("the sandbox's access Secret has no usable %s", v1alpha1.EgressTokenKey)
	}
	err := egressCall(ctx, addr, warmToken, http.MethodPut, "/policy", policy)
	if errors.Is(err, errUnauthorized) {
		return egressCall(ctx, addr, token, http.MethodPut, "/policy", policy)
	}
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]string{"token": token})
	return egressCall(ctx, addr, warmToken, http.MethodPut, api.PathEgressToken, string(body))
}

// egressCall makes one request to an egress API and fails unless it
// answers 2xx.
func egressCall(ctx context.Context, addr, token, method, path, body string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	res, err := podRequest(ctx, method, "http://"+addr+path, api.HeaderEgressToken, token, strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("egress API at %s: %w", addr, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	switch {
	case res.StatusCode == http.StatusUnauthorized:
		return errUnauthorized
	case res.StatusCode/100 != 2:
		return fmt.Errorf("egress API at %s: %s %s answered %s: %s", addr, method, path, res.Status, bytes.TrimSpace(b))
	}
	return nil
}

// podRequest sends a JSON body to an API in a pod (execd, egress) with
// its token in header.
func podRequest(ctx context.Context, method, url, header, token string, body io.Reader) (*http.Response, error) {
	hr, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set(header, token)
	// Whatever answers is in the pod: a redirect is an answer, never
	// followed (it would carry the token elsewhere), and no environment
	// proxy is used.
	c := &http.Client{
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c.Do(hr)
}

// runInPod runs one command through execd and fails unless it exits 0.
func runInPod(ctx context.Context, addr, token string, req api.RunCommandRequest) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	body, _ := json.Marshal(req)
	res, err := podRequest(ctx, http.MethodPost, "http://"+addr+"/command", api.HeaderExecdToken, token, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("execd at %s: %w", addr, err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusUnauthorized {
		return errUnauthorized
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return fmt.Errorf("execd at %s answered %s: %s", addr, res.Status, bytes.TrimSpace(b))
	}
	var out strings.Builder
	rd := sse.NewReader(res.Body)
	for {
		raw, err := rd.Next()
		if err != nil {
			return fmt.Errorf("execd at %s: the stream ended before the command did: %w", addr, err)
		}
		var ev api.ServerStreamEvent
		if json.Unmarshal(raw, &ev) != nil {
			continue
		}
		switch ev.Type {
		case api.EventStdout, api.EventStderr:
			if out.Len() < 4096 {
				out.WriteString(ev.Text)
			}
		case api.EventError:
			what := "an error"
			if ev.Error != nil {
				what = ev.Error.EName + " " + ev.Error.EValue
			}
			return fmt.Errorf("corral adopt failed (%s): %s", what, strings.TrimSpace(out.String()))
		case api.EventExecutionComplete:
			return nil
		}
	}
}
