// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/corral-dev/corral/internal/egress"
	"github.com/corral-dev/corral/internal/initproc"
	"github.com/corral-dev/corral/internal/insandbox"
	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
	"github.com/corral-dev/corral/internal/verifier"
)

// The pod's parts.
const (
	// ContainerName is the sandbox's container: the user's image running
	// corral init.
	ContainerName = v1alpha1.SandboxContainer
	// InstallContainerName copies the corral binary into binVolume, and
	// isolates the network of a pod without a policy.
	InstallContainerName = "corral-install"
	// CheckMountsContainerName checks, in the sandbox's image, that no
	// volume's mount path passes through a link.
	CheckMountsContainerName = "corral-check-mounts"
	binVolume                = "corral-bin"
	// EgressContainerName is the egress sidecar.
	EgressContainerName = "corral-egress"
	// EgressMark is the socket mark of the sidecar's own DNS queries.
	EgressMark   = 0x6372
	egressVolume = "corral-egress"
	egressDir    = "/var/lib/corral-egress"
	// gracePeriod is how long the entrypoint has between SIGTERM and
	// SIGKILL when the sandbox is stopped or deleted.
	gracePeriod = 10
	// A warm pod's hand-over files, on a memory volume only corral init,
	// execd and `corral adopt` use.
	warmVolume    = "corral-warm"
	warmDir       = "/run/corral-warm"
	warmStart     = warmDir + "/start"
	warmTokenFile = warmDir + "/token"
	warmEnvFile   = warmDir + "/env"
)

// template is what a pod is made of besides its name, labels and owner.
type template struct {
	image       string
	pullPolicy  corev1.PullPolicy
	pullSecrets []corev1.LocalObjectReference
	resources   corev1.ResourceRequirements
	runtime     *string
	// tokenSecret holds the egress token under EgressTokenKey.
	tokenSecret string
	// execdVerifier is what execd checks its token against (its
	// verifier: the pod never holds the token).
	execdVerifier string
	// isolate closes the pod's way out (a pod without an egress policy):
	// The install container programs it, with a NET_ADMIN the sandbox's
	// container never holds.
	isolate bool
	// init is PID 1's command line (corral init).
	init    initproc.Options
	env     []corev1.EnvVar
	volumes []corev1.Volume
	mounts  []corev1.VolumeMount
}

// podFor is the pod that runs sbx when it starts one of its own; token is
// its execd token (of which the pod gets only the verifier).
func (r *sandboxReconciler) podFor(sbx *v1alpha1.Sandbox, token string) *corev1.Pod {
	p := newPod(r.cfg, template{
		image: sbx.Spec.Image, pullPolicy: sbx.Spec.ImagePullPolicy, pullSecrets: sbx.Spec.ImagePullSecrets,
		resources: sbx.Spec.Resources, runtime: sbx.Spec.RuntimeClassName, tokenSecret: sbx.Spec.AccessSecretName,
		execdVerifier: verifier.Of(token), isolate: sbx.Spec.Egress == nil,
		init: sandboxInit(sbx.Spec.Entrypoint),
		env:  sbx.Spec.Env,
	})
	addVolumes(p, sbx.Spec.Volumes)
	p.Name, p.Namespace = sbx.Name, sbx.Namespace
	p.Labels = sandboxLabels(sbx)
	p.OwnerReferences = []metav1.OwnerReference{v1alpha1.OwnerRef(sbx, "Sandbox")}
	p.Spec.Hostname = hostname(sbx.Name)
	if sbx.Spec.Egress != nil {
		addEgress(r.cfg, p, sbx.Name, sbx.Spec.Egress.Policy, sbx.Spec.AccessSecretName)
	}
	return p
}

// addVolumes mounts the Sandbox's claims in p's sandbox container, each
// as pod volume "vol-N" (corral's own are "corral-..."). The kubelet
// resolves a sub-path inside its volume, refusing links out of it.
func addVolumes(p *corev1.Pod, vols []v1alpha1.SandboxVolume) {
	if len(vols) == 0 {
		return
	}
	c := &p.Spec.Containers[0]
	check := []string{insandbox.Binary, "check-mounts", "--", insandbox.BinaryDir}
	for i, v := range vols {
		name := fmt.Sprintf("vol-%d", i)
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.ClaimName, ReadOnly: v.ReadOnly},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: v.MountPath, SubPath: v.SubPath, ReadOnly: v.ReadOnly})
		check = append(check, v.MountPath)
	}
	// The runtime follows links in a mount path inside the image's root,
	// and mounts the claims after corral's binary volume: a claim at
	// /v/.corral, with /v -> / in the image, would cover corral. The same
	// image, started first with nothing of the tenant's mounted, refuses
	// every such path (and a link at corral's own).
	no, yes, zero := false, true, int64(0)
	p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{
		Name:                     CheckMountsContainerName,
		Image:                    c.Image,
		ImagePullPolicy:          c.ImagePullPolicy,
		Command:                  check,
		VolumeMounts:             []corev1.VolumeMount{{Name: binVolume, MountPath: insandbox.BinaryDir, ReadOnly: true}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext: &corev1.SecurityContext{
			RunAsUser:                &zero,
			RunAsNonRoot:             &no,
			ReadOnlyRootFilesystem:   &yes,
			AllowPrivilegeEscalation: &no,
			// Enough to look up any path of the image, nothing else.
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"DAC_READ_SEARCH"}},
		},
	})
}

// warmPolicy is a warm pod's policy until a Sandbox adopts the pod.
const warmPolicy = `{"defaultAction":"deny"}`

// addEgress gives p the egress sidecar enforcing policy, its API token
// under EgressTokenKey of Secret tokenSecret: a native sidecar (it
// starts, and enforces, before the sandbox and outlives its restarts) in
// the pod's network namespace with NET_ADMIN, which the sandbox never
// has, in a PID namespace of its own. The pod resolves through the
// sidecar's DNS proxy. A policy or token changed through the API (an
// adoption) is kept on the sidecar's memory volume across its restarts.
func addEgress(cfg Config, p *corev1.Pod, name, policy, tokenSecret string) {
	always := corev1.ContainerRestartPolicyAlways
	no, yes, zero := false, true, int64(0)
	o := egress.DefaultOptions()
	o.Netns, o.SandboxID, o.Policy = "self", name, policy
	o.PolicyFile, o.TokenState, o.ExemptMark = egressDir+"/policy.json", egressDir+"/token", fmt.Sprintf("%#x", EgressMark)
	o.Upstreams, o.Deny, o.AllowPrivate = strings.Join(cfg.EgressUpstreams, ","), strings.Join(cfg.EgressDeny, ","), cfg.EgressAllowPrivate
	args := o.Argv(insandbox.ImageBinary)
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: egressVolume, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory},
	}})
	p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{
		Name:            EgressContainerName,
		Image:           cfg.CorralImage,
		ImagePullPolicy: cfg.CorralImagePullPolicy,
		RestartPolicy:   &always,
		Command:         args,
		// Optional: a warm pod's Secret is deleted once the pod is adopted,
		// and a sidecar restarted after that runs on the token the adoption
		// left in its state file.
		Env: []corev1.EnvVar{{Name: "OPENSANDBOX_EGRESS_TOKEN", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: tokenSecret}, Key: v1alpha1.EgressTokenKey, Optional: &yes,
			},
		}}},
		Ports:        []corev1.ContainerPort{{Name: "egress", ContainerPort: insandbox.EgressPort, Protocol: corev1.ProtocolTCP}},
		VolumeMounts: []corev1.VolumeMount{{Name: egressVolume, MountPath: egressDir}},
		// The sandbox starts once the policy is in force and the API
		// answers.
		StartupProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(insandbox.EgressPort)}},
			PeriodSeconds:    1,
			FailureThreshold: 60,
		},
		SecurityContext: &corev1.SecurityContext{
			RunAsUser:                &zero,
			RunAsNonRoot:             &no,
			AllowPrivilegeEscalation: &no,
			ReadOnlyRootFilesystem:   &yes,
			Capabilities: &corev1.Capabilities{
				Drop: []corev1.Capability{"ALL"},
				Add:  []corev1.Capability{"NET_ADMIN", "NET_BIND_SERVICE"},
			},
		},
	})
	p.Spec.DNSPolicy = corev1.DNSNone
	p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"127.0.0.1"}}
}

// warmPodFor is an unclaimed pod of pool: corral init and execd run, the
// entrypoint waits for an adoption; token is the warm execd token.
func (r *poolReconciler) warmPodFor(pool *v1alpha1.SandboxPool, name, token string) *corev1.Pod {
	t := pool.Spec.Template
	p := newPod(r.cfg, template{
		image: t.Image, pullPolicy: t.ImagePullPolicy, pullSecrets: t.ImagePullSecrets,
		resources: t.Resources, runtime: t.RuntimeClassName, tokenSecret: warmSecret(name),
		execdVerifier: verifier.Of(token), isolate: !t.Egress,
		init: warmInit(),
		volumes: []corev1.Volume{{Name: warmVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory},
		}}},
		mounts: []corev1.VolumeMount{{Name: warmVolume, MountPath: warmDir}},
	})
	p.Name, p.Namespace = name, pool.Namespace
	p.Labels = map[string]string{LabelManaged: "true", LabelPool: pool.Name}
	p.OwnerReferences = []metav1.OwnerReference{v1alpha1.OwnerRef(pool, "SandboxPool")}
	if t.Egress {
		addEgress(r.cfg, p, name, warmPolicy, warmSecret(name))
	}
	return p
}

// sandboxInit is a Sandbox's PID 1, running its entrypoint.
func sandboxInit(entrypoint []string) initproc.Options {
	o := initproc.DefaultOptions()
	o.Entrypoint = entrypoint
	return o
}

// warmInit is a warm pod's PID 1: execd runs, the entrypoint waits for
// an adoption's start on the hand-over volume.
func warmInit() initproc.Options {
	o := initproc.DefaultOptions()
	o.WaitStart, o.ExecdTokenFile, o.ExecdEnvFile = warmStart, warmTokenFile, warmEnvFile
	return o
}

// sandboxLabels are the labels of sbx's pod: the Sandbox's own, and
// corral's.
func sandboxLabels(sbx *v1alpha1.Sandbox) map[string]string {
	lbl := make(map[string]string, len(sbx.Labels)+3)
	for k, v := range sbx.Labels {
		lbl[k] = v
	}
	lbl[LabelSandboxID] = sbx.Name
	lbl[LabelManaged] = "true"
	lbl[LabelTenant] = sbx.Spec.Tenant
	return lbl
}

// sandboxCapabilities are what a sandbox's container keeps of the
// runtime's default set, as the other runtimes do: no MKNOD, NET_RAW,
// SETFCAP or AUDIT_WRITE.
func sandboxCapabilities() []corev1.Capability {
	var caps []corev1.Capability
	for _, c := range insandbox.Capabilities() {
		caps = append(caps, corev1.Capability(c))
	}
	return caps
}

func newPod(cfg Config, t template) *corev1.Pod {
	env := append([]corev1.EnvVar{{Name: insandbox.ExecdTokenEnv, Value: t.execdVerifier}}, t.env...)
	grace := int64(gracePeriod)
	no := false
	install := []string{insandbox.ImageBinary, "install-binary", insandbox.Binary}
	root := int64(0)
	var installUser *int64
	installCaps := &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	if t.isolate {
		// The install container closes the way out before the sandbox's
		// container starts; only it holds NET_ADMIN.
		install = []string{insandbox.ImageBinary, "install-binary", "--isolate-network", insandbox.Binary}
		installCaps.Add = []corev1.Capability{"NET_ADMIN"}
		installUser = &root
	}
	command := t.init.Argv(insandbox.Binary)
	var hostUsers *bool
	if cfg.UserNamespaces {
		hostUsers = &no
	}
	return &corev1.Pod{
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			HostUsers:                     hostUsers,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			RuntimeClassName:              t.runtime,
			ImagePullSecrets:              t.pullSecrets,
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Volumes: append([]corev1.Volume{{
				Name:         binVolume,
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
			}}, t.volumes...),
			InitContainers: []corev1.Container{{
				Name:            InstallContainerName,
				Image:           cfg.CorralImage,
				ImagePullPolicy: cfg.CorralImagePullPolicy,
				Command:         install,
				VolumeMounts:    []corev1.VolumeMount{{Name: binVolume, MountPath: insandbox.BinaryDir}},
				SecurityContext: &corev1.SecurityContext{
					RunAsUser:                installUser,
					AllowPrivilegeEscalation: &no,
					Capabilities:             installCaps,
				},
			}},
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           t.image,
				ImagePullPolicy: t.pullPolicy,
				Command:         command,
				Env:             env,
				Resources:       t.resources,
				Ports:           []corev1.ContainerPort{{Name: "execd", ContainerPort: insandbox.ExecdPort, Protocol: corev1.ProtocolTCP}},
				VolumeMounts:    append([]corev1.VolumeMount{{Name: binVolume, MountPath: insandbox.BinaryDir, ReadOnly: true}}, t.mounts...),
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Path: "/ping", Port: intstr.FromInt32(insandbox.ExecdPort),
					}},
					PeriodSeconds:    1,
					FailureThreshold: 3,
				},
				SecurityContext: &corev1.SecurityContext{
					// no_new_privs: no setuid program gains anything.
					AllowPrivilegeEscalation: &no,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: sandboxCapabilities()},
				},
			}},
		},
	}
}

// hostname is the first DNS label of a sandbox name (at most 63 bytes).
func hostname(name string) string {
	if len(name) > 63 {
		return name[:63]
	}
	return name
}
