// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/corral-dev/corral/internal/kube/apis/v1alpha1"
)

// The pod's parts.
const (
	// ContainerName is the sandbox's container: the user's image running
	// corral init.
	ContainerName = "sandbox"
	// InstallContainerName copies the corral binary into binVolume.
	InstallContainerName = "corral-install"
	binVolume            = "corral-bin"
	binDir               = "/.corral"
	// ExecdPort is where execd listens in the pod.
	ExecdPort = 44772
	// TokenKey is the key of the access Secret holding execd's token.
	TokenKey = "execd-token"
	// execdStateDir is on the container's writable layer.
	execdStateDir = "/var/lib/corral-execd"
	// gracePeriod is how long the entrypoint has between SIGTERM and
	// SIGKILL when the sandbox is stopped or deleted.
	gracePeriod = 10
)

// podFor is the pod that runs sbx.
func (r *sandboxReconciler) podFor(sbx *v1alpha1.Sandbox) *corev1.Pod {
	lbl := make(map[string]string, len(sbx.Labels)+3)
	for k, v := range sbx.Labels {
		lbl[k] = v
	}
	lbl[LabelSandboxID] = sbx.Name
	lbl[LabelManaged] = "true"
	lbl[LabelTenant] = sbx.Spec.Tenant

	env := append([]corev1.EnvVar{{
		Name: "EXECD_ACCESS_TOKEN",
		ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: sbx.Spec.AccessSecretName},
			Key:                  TokenKey,
		}},
	}}, sbx.Spec.Env...)
	args := append([]string{binDir + "/corral", "init", "--execd-state-dir", execdStateDir, "--"}, sbx.Spec.Entrypoint...)
	grace := int64(gracePeriod)
	no := false
	t := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      sbx.Name,
			Namespace: sbx.Namespace,
			Labels:    lbl,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         v1alpha1.GroupVersion.String(),
				Kind:               "Sandbox",
				Name:               sbx.Name,
				UID:                sbx.UID,
				Controller:         &t,
				BlockOwnerDeletion: &t,
			}},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			RuntimeClassName:              sbx.Spec.RuntimeClassName,
			ImagePullSecrets:              sbx.Spec.ImagePullSecrets,
			Hostname:                      hostname(sbx.Name),
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Volumes: []corev1.Volume{{
				Name:         binVolume,
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
			}},
			InitContainers: []corev1.Container{{
				Name:            InstallContainerName,
				Image:           r.cfg.CorralImage,
				ImagePullPolicy: r.cfg.CorralImagePullPolicy,
				Command:         []string{"/corral", "install-binary", binDir + "/corral"},
				VolumeMounts:    []corev1.VolumeMount{{Name: binVolume, MountPath: binDir}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           sbx.Spec.Image,
				ImagePullPolicy: sbx.Spec.ImagePullPolicy,
				Command:         args,
				Env:             env,
				Resources:       sbx.Spec.Resources,
				Ports:           []corev1.ContainerPort{{Name: "execd", ContainerPort: ExecdPort, Protocol: corev1.ProtocolTCP}},
				VolumeMounts:    []corev1.VolumeMount{{Name: binVolume, MountPath: binDir, ReadOnly: true}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Path: "/ping", Port: intstr.FromInt32(ExecdPort),
					}},
					PeriodSeconds:    1,
					FailureThreshold: 3,
				},
				SecurityContext: &corev1.SecurityContext{
					// The sandbox gets the runtime's default capabilities
					// less raw sockets; never NET_ADMIN.
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW", "NET_ADMIN"}},
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
