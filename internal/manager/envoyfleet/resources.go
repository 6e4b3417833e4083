package envoyfleet

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"maps"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/settings"
	xdsbootstrap "kubelb.dev/kubelb/internal/xds/bootstrap"
)

// Graceful shutdown defaults, the product specification's (Config envoyProxy.gracefulShutdown
// overrides them).
const (
	DefaultDrainTimeout     = 30 * time.Second
	DefaultMinDrainDuration = 10 * time.Second
	// DefaultTerminationGracePeriod is the pods' termination grace period when graceful
	// shutdown is on and the Config sets none, unless drain + shutdownSlack is longer.
	DefaultTerminationGracePeriod = 60 * time.Second
	// shutdownSlack is the least time the pod gets after a drain that ran its full time.
	shutdownSlack = 15 * time.Second
	// envoyUID is the uid of the envoy user of the full envoyproxy/envoy image; the
	// distroless image (whose own user is 65532) runs as it too: a numeric uid, and the
	// mounted bootstrap and certificate files are readable by all.
	envoyUID = 101
)

const (
	bootstrapDir  = "/etc/envoy"
	containerName = "envoy"
	volumeName    = "bootstrap"
	tlsVolumeName = "xds-tls"
	envoyBinary   = "/usr/local/bin/envoy"
	// annotationDefaultContainer names the container kubectl logs and exec pick.
	annotationDefaultContainer = "kubectl.kubernetes.io/default-container"
)

// Input is everything the fleet of one tenant namespace is made from.
type Input struct {
	// Namespace is the tenant namespace (tenant-x).
	Namespace string
	// Settings are the tenant's effective settings (settings.Resolve).
	Settings settings.Tenant
	// Image is the Envoy image from the flag; Settings.Envoy.Image overrides it.
	Image string
	// ShutdownManagerImage is the image of the shutdown manager sidecar (the manager's).
	ShutdownManagerImage string
	// Bootstrap is the Envoy bootstrap (xdsbootstrap.Generate).
	Bootstrap []byte
}

// Fleet is the desired fleet of a tenant: the bootstrap ConfigMap and either a Deployment or
// a DaemonSet.
type Fleet struct {
	ConfigMap  *corev1.ConfigMap
	Deployment *appsv1.Deployment
	DaemonSet  *appsv1.DaemonSet
}

// objectLabels are on every object and pod of the fleet: the Envoy pod labels
// (hubnames.EnvoyPodLabels) and the managed-by label.
func objectLabels(namespace string) map[string]string {
	l := hubnames.EnvoyPodLabels(namespace)
	l[kubelbv1alpha1.LabelManagedBy] = kubelbv1alpha1.LabelManagedByValue
	return l
}

// Build computes the desired fleet. It is pure: the same input gives the same objects.
func Build(in Input) Fleet {
	tenant := hubnames.TenantName(in.Namespace)
	labels := objectLabels(in.Namespace)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: BootstrapConfigMapName, Namespace: in.Namespace, Labels: maps.Clone(labels)},
		Data:       map[string]string{BootstrapKey: string(in.Bootstrap)},
	}
	template := podTemplate(in, tenant, labels)
	meta := metav1.ObjectMeta{Name: WorkloadName, Namespace: in.Namespace, Labels: maps.Clone(labels)}
	selector := &metav1.LabelSelector{MatchLabels: hubnames.EnvoyPodLabels(in.Namespace)}
	f := Fleet{ConfigMap: cm}
	if in.Settings.Envoy.UseDaemonset {
		f.DaemonSet = &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: selector, Template: template}}
		setHash(&f.DaemonSet.ObjectMeta, f.DaemonSet.Spec)
	} else {
		f.Deployment = &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(in.Settings.Envoy.Replicas), Selector: selector, Template: template,
		}}
		setHash(&f.Deployment.ObjectMeta, f.Deployment.Spec)
	}
	return f
}

func podTemplate(in Input, tenant string, labels map[string]string) corev1.PodTemplateSpec {
	envoy := in.Settings.Envoy
	image := in.Image
	if envoy.Image != "" {
		image = envoy.Image
	}
	drain, minDrain, grace, graceful := shutdownTimes(envoy.GracefulShutdown)
	args := []string{
		"-c", bootstrapDir + "/" + BootstrapKey,
		"--service-node", "$(POD_NAME)",
		"--service-cluster", in.Namespace,
		"--log-level", "info",
		"--disable-hot-restart",
		"--drain-time-s", strconv.Itoa(int(drain / time.Second)),
		"--concurrency", strconv.Itoa(Workers(envoy.Resources)),
	}
	c := corev1.Container{
		Name:            containerName,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{envoyBinary},
		Args:            args,
		Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"},
		}}},
		Ports: []corev1.ContainerPort{
			{Name: "ready", ContainerPort: ReadyPort, Protocol: corev1.ProtocolTCP},
			{Name: StatsPortName, ContainerPort: StatsPort, Protocol: corev1.ProtocolTCP},
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: xdsbootstrap.ReadyPath, Port: intstr.FromString("ready"), Scheme: corev1.URISchemeHTTP,
			}},
			PeriodSeconds: 5, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3,
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: volumeName, MountPath: bootstrapDir, ReadOnly: true},
			// The client certificate for xDS; Envoy reloads it when the kubelet updates the files.
			{Name: tlsVolumeName, MountPath: xdsbootstrap.DefaultTLSDir, ReadOnly: true},
		},
		SecurityContext: restricted(envoyUID),
	}
	if envoy.Resources != nil {
		c.Resources = *envoy.Resources.DeepCopy()
	}
	sum := sha256.Sum256(in.Bootstrap)
	spec := corev1.PodSpec{
		Containers:                    []corev1.Container{c},
		TerminationGracePeriodSeconds: ptr.To(int64(grace / time.Second)),
		// The tenant namespace holds one hub Service per LoadBalancer: no env var per Service.
		EnableServiceLinks:           ptr.To(false),
		AutomountServiceAccountToken: ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			// Listener ports below 1024 without root or capabilities.
			Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}},
		},
		NodeSelector: maps.Clone(envoy.NodeSelector),
		Tolerations:  append([]corev1.Toleration(nil), envoy.Tolerations...),
		Affinity:     affinity(envoy, tenant),
		Volumes: []corev1.Volume{
			{Name: volumeName, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: BootstrapConfigMapName},
			}}},
			{Name: tlsVolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: pki.ClientSecretName,
			}}},
		},
	}
	annotations := map[string]string{AnnotationBootstrapHash: hex.EncodeToString(sum[:8])}
	if graceful {
		gracefulShutdown(&spec, &spec.Containers[0], in.ShutdownManagerImage, minDrain, drain)
		annotations[annotationDefaultContainer] = containerName
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels), Annotations: annotations},
		Spec:       spec,
	}
}

// DefaultWorkers is Envoy's worker threads (--concurrency) when its container has no CPU limit
// or request. Envoy's own default is one per core of the node, and every worker holds a
// descriptor for every listener (with or without reuse_port: without it, Envoy duplicates the
// one socket for each worker), so a tenant of 10 000 Services on a 64-core node would need
// 640 000 descriptors. Figures: docs/performance.md, "Descriptors of one Envoy".
const DefaultWorkers = 2

// Workers is Envoy's worker threads for the Envoy container's resources: its CPU limit
// rounded up, else its CPU request rounded up, else DefaultWorkers; at least one.
func Workers(r *corev1.ResourceRequirements) int {
	if r != nil {
		for _, q := range []resource.Quantity{r.Limits[corev1.ResourceCPU], r.Requests[corev1.ResourceCPU]} {
			if q.Sign() > 0 {
				return int(max(1, (q.MilliValue()+999)/1000))
			}
		}
	}
	return DefaultWorkers
}

// affinity is the Config's affinity plus, for a Deployment with singlePodPerNode, a required
// anti-affinity that keeps two of the tenant's Envoy pods off the same node.
func affinity(envoy kubelbv1alpha1.EnvoyProxy, tenant string) *corev1.Affinity {
	var a *corev1.Affinity
	if envoy.Affinity != nil {
		a = envoy.Affinity.DeepCopy()
	}
	if !envoy.SinglePodPerNode || envoy.UseDaemonset {
		return a
	}
	if a == nil {
		a = &corev1.Affinity{}
	}
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
		corev1.PodAffinityTerm{
			LabelSelector: &metav1.LabelSelector{MatchLabels: hubnames.EnvoyPodLabels(hubnames.TenantNamespace(tenant))},
			TopologyKey:   corev1.LabelHostname,
		})
	return a
}

// shutdownTimes returns Envoy's drain time, the least time the drain lasts, the pod's
// termination grace period, and whether graceful shutdown is on.
func shutdownTimes(g *kubelbv1alpha1.GracefulShutdown) (drain, minDrain, grace time.Duration, graceful bool) {
	drain, minDrain, graceful = DefaultDrainTimeout, DefaultMinDrainDuration, true
	if g != nil {
		graceful = !g.Disabled
		if g.DrainTimeout != nil && g.DrainTimeout.Duration >= 0 {
			drain = g.DrainTimeout.Duration.Truncate(time.Second)
		}
		if g.MinDrainDuration != nil && g.MinDrainDuration.Duration >= 0 {
			minDrain = g.MinDrainDuration.Duration.Truncate(time.Second)
		}
	}
	minDrain = min(minDrain, drain)
	grace = corev1.DefaultTerminationGracePeriodSeconds * time.Second
	if graceful {
		grace = max(DefaultTerminationGracePeriod, drain+shutdownSlack)
	}
	if g != nil && g.TerminationGracePeriodSeconds != nil && *g.TerminationGracePeriodSeconds >= 0 {
		grace = time.Duration(*g.TerminationGracePeriodSeconds) * time.Second
	}
	return drain, minDrain, grace, graceful
}

// setHash records a hash of the desired labels and spec on the object.
func setHash(meta *metav1.ObjectMeta, spec any) {
	// API types always marshal.
	b, _ := json.Marshal(struct {
		Labels map[string]string `json:"labels"`
		Spec   any               `json:"spec"`
	}{meta.Labels, spec})
	sum := sha256.Sum256(b)
	meta.Annotations = map[string]string{AnnotationConfigHash: hex.EncodeToString(sum[:16])}
}

// ClientSecret is the Secret that carries the fleet's client certificate for xDS (certPEM,
// keyPEM, naming the tenant namespace), the CA that signed it and the SDS files of the
// bootstrap (sds, xdsbootstrap.TLSFiles). The fleet's pods mount it at
// xdsbootstrap.DefaultTLSDir. It is pure: the certificate is issued by the caller.
func ClientSecret(namespace string, certPEM, keyPEM, caPEM []byte, sds map[string][]byte) *corev1.Secret {
	labels := objectLabels(namespace)
	labels[pki.LabelXDSTLS] = "client"
	data := make(map[string][]byte, len(sds)+3)
	maps.Copy(data, sds)
	data[pki.KeyCert], data[pki.KeyKey], data[pki.KeyCA] = certPEM, keyPEM, caPEM
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: pki.ClientSecretName, Namespace: namespace, Labels: labels},
		Type:       corev1.SecretTypeTLS,
		Data:       data,
	}
}

// ClientSecretCurrent reports whether an existing client Secret can stay: it carries the
// labels, the CA ca (as ca.crt), the SDS files, and a certificate of ca for namespace that is
// not yet due for renewal at now (pki.RenewFraction of its lifetime). It also returns when
// the certificate will be due (zero when it must be reissued now).
func ClientSecretCurrent(existing *corev1.Secret, namespace string, ca *pki.CA, sds map[string][]byte, now time.Time) (bool, time.Time) {
	if existing == nil || !bytes.Equal(existing.Data[pki.KeyCA], ca.CertPEM) || !hubnames.HasAll(existing.Labels, ClientSecret(namespace, nil, nil, nil, nil).Labels) {
		return false, time.Time{}
	}
	for name, data := range sds {
		if !bytes.Equal(existing.Data[name], data) {
			return false, time.Time{}
		}
	}
	cert, err := tls.X509KeyPair(existing.Data[pki.KeyCert], existing.Data[pki.KeyKey])
	if err != nil || cert.Leaf == nil {
		return false, time.Time{}
	}
	if tenant, err := pki.TenantOf(cert.Leaf); err != nil || tenant != namespace {
		return false, time.Time{}
	}
	renew, at := pki.NeedsRenewal(existing.Data[pki.KeyCert], ca, now)
	return !renew, at
}

// restricted is the security context of the fleet's containers: user and group uid, no
// privilege escalation, a read-only root file system, no capabilities.
func restricted(uid int64) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To(uid),
		RunAsGroup:               ptr.To(uid),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// withSeccomp adds the runtime's default seccomp profile to c.
func withSeccomp(c *corev1.SecurityContext) *corev1.SecurityContext {
	c.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	return c
}
