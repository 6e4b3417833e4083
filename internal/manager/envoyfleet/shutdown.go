package envoyfleet

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/internal/envoydrain"
)

const (
	// ShutdownManagerContainerName is the sidecar that drains Envoy before it is stopped.
	ShutdownManagerContainerName = "shutdown-manager"
	// ManagerBinary is the kubelb binary in the manager's image (Dockerfile.manager).
	ManagerBinary = "/usr/local/bin/kubelb"
	// managerUID is the uid the manager's distroless image runs as.
	managerUID = 65532
)

// gracefulShutdown adds the drain to the pod: Envoy exits at once on SIGTERM, so the pod
// gets the shutdown manager as a second container ("kubelb envoy-shutdown-manager", from the
// manager's image), which needs no shell in either image. When the pod is stopped the kubelet
// runs both containers' preStop hooks at once: the sidecar's (an exec of the static kubelb
// binary in the sidecar) asks Envoy's admin interface on loopback to drain and waits
// minDrain, then until no listener has a downstream connection open, at most drain; Envoy's
// (an HTTP GET of the sidecar's /drained) returns when that drain ended, and only then does
// Envoy get its SIGTERM. /drained only waits: it cannot start or change a drain.
func gracefulShutdown(spec *corev1.PodSpec, envoy *corev1.Container, image string, minDrain, drain time.Duration) {
	envoy.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: envoydrain.DrainedPath, Port: intstr.FromInt32(ShutdownManagerPort), Scheme: corev1.URISchemeHTTP,
	}}}
	spec.Containers = append(spec.Containers, corev1.Container{
		Name:            ShutdownManagerContainerName,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{ManagerBinary},
		Args: []string{
			envoydrain.Command,
			fmt.Sprintf("--admin-address=127.0.0.1:%d", AdminPort),
			fmt.Sprintf("--listen-address=:%d", ShutdownManagerPort),
			"--min-drain-duration=" + strconv.Itoa(int(minDrain/time.Second)) + "s",
			"--drain-timeout=" + strconv.Itoa(int(drain/time.Second)) + "s",
		},
		Ports: []corev1.ContainerPort{{Name: "shutdown", ContainerPort: ShutdownManagerPort, Protocol: corev1.ProtocolTCP}},
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
			Command: []string{ManagerBinary, envoydrain.Command, envoydrain.DrainCommand},
		}}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
		SecurityContext:          withSeccomp(restricted(managerUID)),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	})
}
