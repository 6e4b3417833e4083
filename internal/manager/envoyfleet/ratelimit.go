package envoyfleet

import (
	"context"
	"fmt"
	"maps"
	"net"
	"path"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/settings"
	xdsbootstrap "kubelb.dev/kubelb/internal/xds/bootstrap"
)

// The tenant's rate-limit service (Envoy's ratelimit), which counts its global rate limits in
// the Redis of Config spec.rateLimit: a Deployment and a ClusterIP Service, both named
// RateLimitName, in the tenant namespace, while the Config has a store and the tenant has a
// fleet. It gets its configuration (the tenant's RateLimitConfig, domain = the tenant
// namespace) from the manager's xDS server with the fleet's client certificate, so it is
// only ever served its own tenant's. The envoycp controller points the tenant's Envoys at
// the Service's cluster IP (RateLimitGRPCPort).
const (
	// RateLimitName names the Deployment and Service of the tenant's rate-limit service.
	RateLimitName = "kubelb-ratelimit"
	// RateLimitAppName is the value of hubnames.LabelAppName on its objects and pods.
	RateLimitAppName = "ratelimit"
	// RateLimitGRPCPort is the port of its gRPC service (Envoy's ratelimit filter), in the
	// pods and on the Service.
	RateLimitGRPCPort = 8081
	// rateLimitHTTPPort serves /healthcheck (readiness).
	rateLimitHTTPPort = 8080
	// rateLimitDebugPort is ratelimit's debug listener, on loopback only.
	rateLimitDebugPort = 6070
	rateLimitBinary    = "/bin/ratelimit"
	rateLimitUID       = 65532
)

// DefaultRateLimitResources are the rate-limit container's resources unless the Config's
// spec.rateLimit.resources sets them.
func DefaultRateLimitResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
}

// RateLimitPodLabels are the labels of a tenant's rate-limit pods (the Service selects
// them); they are not the Envoy pods' (hubnames.EnvoyPodLabels), so no hub Service of a
// LoadBalancer or Gateway selects them.
func RateLimitPodLabels(namespace string) map[string]string {
	return map[string]string{
		hubnames.LabelAppName:          RateLimitAppName,
		kubelbv1alpha1.LabelTenantName: hubnames.TenantName(namespace),
	}
}

func rateLimitLabels(namespace string) map[string]string {
	l := RateLimitPodLabels(namespace)
	l[kubelbv1alpha1.LabelManagedBy] = kubelbv1alpha1.LabelManagedByValue
	return l
}

// IsRateLimitService reports whether o is a tenant's rate-limit Service as the manager makes
// it: its name and labels.
func IsRateLimitService(o metav1.Object) bool {
	return o != nil && o.GetName() == RateLimitName && hubnames.HasAll(o.GetLabels(), rateLimitLabels(o.GetNamespace()))
}

// RateLimitInput is what a tenant's rate-limit service is made from.
type RateLimitInput struct {
	// Namespace is the tenant namespace.
	Namespace string
	// Store is the Config's spec.rateLimit (settings.RateLimitStoreError checked it).
	Store *kubelbv1alpha1.RateLimitStore
	// XDSAddress is host:port of the manager's xDS server, as the fleet's bootstrap dials it;
	// its host is the name the server's certificate must have.
	XDSAddress string
	// Envoy are the fleet's settings: the pods go where the fleet's go (node selector,
	// tolerations).
	Envoy kubelbv1alpha1.EnvoyProxy
}

// RateLimit is the desired rate-limit service of a tenant.
type RateLimit struct {
	Deployment *appsv1.Deployment
	Service    *corev1.Service
}

// BuildRateLimit computes a tenant's rate-limit service. It is pure.
func BuildRateLimit(in RateLimitInput) RateLimit {
	labels := rateLimitLabels(in.Namespace)
	host, _, _ := net.SplitHostPort(in.XDSAddress) // checked by Options.withDefaults
	file := func(k string) string { return path.Join(xdsbootstrap.DefaultTLSDir, k) }
	env := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
		{Name: "HOST", Value: "0.0.0.0"}, {Name: "PORT", Value: strconv.Itoa(rateLimitHTTPPort)},
		{Name: "GRPC_HOST", Value: "0.0.0.0"}, {Name: "GRPC_PORT", Value: strconv.Itoa(RateLimitGRPCPort)},
		{Name: "DEBUG_HOST", Value: "127.0.0.1"}, {Name: "DEBUG_PORT", Value: strconv.Itoa(rateLimitDebugPort)},
		{Name: "LOG_LEVEL", Value: "info"}, {Name: "USE_STATSD", Value: "false"}, {Name: "USE_PROMETHEUS", Value: "false"},
		{Name: "BACKEND_TYPE", Value: "redis"}, {Name: "REDIS_SOCKET_TYPE", Value: "tcp"}, {Name: "REDIS_URL", Value: in.Store.RedisURL},
		{Name: "CONFIG_TYPE", Value: "GRPC_XDS_SOTW"}, {Name: "CONFIG_GRPC_XDS_SERVER_URL", Value: in.XDSAddress},
		{Name: "CONFIG_GRPC_XDS_NODE_ID", Value: "$(POD_NAME)"},
		{Name: "CONFIG_GRPC_XDS_SERVER_USE_TLS", Value: "true"}, {Name: "CONFIG_GRPC_XDS_SERVER_TLS_SAN", Value: host},
		{Name: "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", Value: file(pki.KeyCert)}, {Name: "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", Value: file(pki.KeyKey)},
		{Name: "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", Value: file(pki.KeyCA)},
	}
	res := DefaultRateLimitResources()
	if in.Store.Resources != nil {
		res = *in.Store.Resources.DeepCopy()
	}
	c := corev1.Container{
		Name: RateLimitAppName, Image: in.Store.Image, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{rateLimitBinary}, Env: env, Resources: res,
		Ports: []corev1.ContainerPort{
			{Name: "grpc", ContainerPort: RateLimitGRPCPort, Protocol: corev1.ProtocolTCP},
			{Name: "http", ContainerPort: rateLimitHTTPPort, Protocol: corev1.ProtocolTCP},
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthcheck", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP,
			}},
			PeriodSeconds: 5, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3,
		},
		// The fleet's client certificate: ratelimit connects to the manager's xDS server as
		// the tenant's proxies do, and is served only the tenant's configuration.
		VolumeMounts:    []corev1.VolumeMount{{Name: tlsVolumeName, MountPath: xdsbootstrap.DefaultTLSDir, ReadOnly: true}},
		SecurityContext: restricted(rateLimitUID),
	}
	spec := corev1.PodSpec{
		Containers:                   []corev1.Container{c},
		EnableServiceLinks:           ptr.To(false),
		AutomountServiceAccountToken: ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		NodeSelector: maps.Clone(in.Envoy.NodeSelector),
		Tolerations:  append([]corev1.Toleration(nil), in.Envoy.Tolerations...),
		Volumes: []corev1.Volume{{Name: tlsVolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: pki.ClientSecretName,
		}}}},
	}
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: RateLimitName, Namespace: in.Namespace, Labels: maps.Clone(labels)},
		Spec: appsv1.DeploymentSpec{
			// One replica: the counts are in Redis, so a restarted pod loses none.
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: RateLimitPodLabels(in.Namespace)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)}, Spec: spec},
		},
	}
	setHash(&dep.ObjectMeta, dep.Spec)
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: RateLimitName, Namespace: in.Namespace, Labels: maps.Clone(labels)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: RateLimitPodLabels(in.Namespace),
			Ports: []corev1.ServicePort{{Name: "grpc", Port: RateLimitGRPCPort, TargetPort: intstr.FromString("grpc"),
				Protocol: corev1.ProtocolTCP, AppProtocol: ptr.To("kubernetes.io/h2c")}},
		},
	}
	setHash(&svc.ObjectMeta, svc.Spec)
	return RateLimit{Deployment: dep, Service: svc}
}

// ReasonInvalidRateLimit is the reason of the Warning Event on the Config when its
// spec.rateLimit is not valid: no rate-limit service is deployed (and global rate limits
// are OverPlatformBound).
const ReasonInvalidRateLimit = "InvalidRateLimit"

// applyRateLimit keeps the tenant's rate-limit service what the settings want: deployed
// while the Config has a valid store, removed otherwise.
func (r *Reconciler) applyRateLimit(ctx context.Context, ns string, eff settings.Tenant, existing current) error {
	if eff.RateLimit == nil {
		for _, obj := range []client.Object{existing.rateLimitDeployment, existing.rateLimitService} {
			if !isNil(obj) {
				if err := deleteByUID(ctx, r.client, obj); err != nil {
					return err
				}
			}
		}
		return nil
	}
	want := BuildRateLimit(RateLimitInput{Namespace: ns, Store: eff.RateLimit, XDSAddress: r.opts.XDSAddress, Envoy: eff.Envoy})
	if err := r.applyDeployment(ctx, want.Deployment, existing.rateLimitDeployment); err != nil {
		return err
	}
	if s := existing.rateLimitService; s != nil && upToDate(s.ObjectMeta, want.Service.ObjectMeta) {
		return nil
	}
	var have client.Object
	if existing.rateLimitService != nil {
		have = existing.rateLimitService
	}
	return r.applyObject(ctx, want.Service, have)
}

func isNil(o client.Object) bool {
	switch v := o.(type) {
	case *appsv1.Deployment:
		return v == nil
	case *corev1.Service:
		return v == nil
	}
	return o == nil
}

// deleteByUID deletes obj, the one read (not one made again since).
func deleteByUID(ctx context.Context, c client.Client, obj client.Object) error {
	uid := obj.GetUID()
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy("Background"))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
