package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigSpec holds the hub-wide defaults; Tenant settings override them.
type ConfigSpec struct {
	AnnotationSettings `json:",inline"`

	// +optional
	EnvoyProxy EnvoyProxy `json:"envoyProxy,omitempty"`
	// +optional
	LoadBalancer LoadBalancerSettings `json:"loadBalancer,omitempty"`
	// +optional
	Ingress IngressSettings `json:"ingress,omitempty"`
	// +optional
	GatewayAPI GatewayAPISettings `json:"gatewayAPI,omitempty"`
	// +optional
	DNS DNSSettings `json:"dns,omitempty"`
	// +optional
	Certificates CertificatesSettings `json:"certificates,omitempty"`
	// EndpointPolicy: which endpoint IPs tenants may use, for every tenant; a Tenant's own
	// lists replace these (each list separately).
	// +optional
	EndpointPolicy *EndpointPolicy `json:"endpointPolicy,omitempty"`
	// Limits bound what each tenant may hold; a Tenant's own spec.limits override them
	// field by field.
	// +optional
	Limits Limits `json:"limits,omitempty"`
	// Upstream tunes the Envoy clusters towards the tenant's nodes (connect timeout, health
	// check, UDP idle timeout, connection limit); a Tenant's own spec.upstream overrides it field by field.
	// +optional
	Upstream UpstreamSettings `json:"upstream,omitempty"`
	// HTTP tunes the tenant's HTTP routes (request and stream idle timeouts); a Tenant's own
	// spec.http overrides it field by field.
	// +optional
	HTTP HTTPSettings `json:"http,omitempty"`
	// TrafficPolicies bound the traffic policies (BackendTrafficPolicy, SecurityPolicy) every
	// tenant may use; a Tenant's own spec.trafficPolicies override them field by field.
	// +optional
	TrafficPolicies *TrafficPolicyBounds `json:"trafficPolicies,omitempty"`
	// TotalHealthCheckProbesPerSecond bounds the active health-check probes per second of
	// all tenants' proxies together: each tenant gets at most an equal share of it (and at
	// most its spec.limits.healthCheckProbesPerSecond). Default 20000.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000000
	// +optional
	TotalHealthCheckProbesPerSecond *int32 `json:"totalHealthCheckProbesPerSecond,omitempty"`
	// RateLimit is the store of the tenants' global rate limits (BackendTrafficPolicy
	// rateLimit.global): with it, the manager runs a rate-limit service (Envoy's ratelimit)
	// in every tenant namespace that has an Envoy fleet, counting in this Redis; without it,
	// a policy with a global rate limit is OverPlatformBound (an addition; ignorable).
	// +optional
	RateLimit *RateLimitStore `json:"rateLimit,omitempty"`
}

// RateLimitStore is the Redis where the tenants' rate-limit services count, and the image
// they run. The tenants share the Redis: each counts under keys of its own domain (its
// tenant namespace).
type RateLimitStore struct {
	// Image of Envoy's rate-limit service (for example envoyproxy/ratelimit:<commit>); it
	// must hold /bin/ratelimit.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._/:@-]*$`
	Image string `json:"image"`
	// RedisURL is the Redis address, host:port (a DNS name or an IP; IPv6 in brackets),
	// reached over plain TCP.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=261
	// +kubebuilder:validation:Pattern=`^([A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}$`
	RedisURL string `json:"redisURL"`
	// Resources of the rate-limit service's container; default requests of 50m CPU and
	// 64Mi memory, and a limit of 256Mi memory.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// EnvoyProxyTopology says how Envoy proxies are laid out.
// +kubebuilder:validation:Enum=shared;dedicated;global
type EnvoyProxyTopology string

// Envoy proxy topologies.
const (
	EnvoyProxyTopologyShared    EnvoyProxyTopology = "shared"
	EnvoyProxyTopologyDedicated EnvoyProxyTopology = "dedicated"
	EnvoyProxyTopologyGlobal    EnvoyProxyTopology = "global"
)

// EnvoyProxy holds the Envoy fleet settings.
type EnvoyProxy struct {
	// Topology of the Envoy fleet; kubelb runs one fleet per tenant ("shared").
	// +kubebuilder:default=shared
	// +optional
	Topology EnvoyProxyTopology `json:"topology,omitempty"`

	// UseDaemonset runs Envoy as a DaemonSet instead of a Deployment.
	// +optional
	UseDaemonset bool `json:"useDaemonset,omitempty"`

	// Replicas of the Envoy Deployment.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// SinglePodPerNode spreads Envoy pods one per node.
	// +optional
	SinglePodPerNode bool `json:"singlePodPerNode,omitempty"`

	// +optional
	// At most 64 labels.
	// +kubebuilder:validation:MaxProperties=64
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	// At most 64.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// +optional
	GracefulShutdown *GracefulShutdown `json:"gracefulShutdown,omitempty"`
	// +optional
	OverloadManager *OverloadManager `json:"overloadManager,omitempty"`
	// +optional
	PodMonitor *PodMonitor `json:"podMonitor,omitempty"`
	// +optional
	HeaderLimits *HeaderLimits `json:"headerLimits,omitempty"`
	// AccessLog writes one JSON line per request (HTTP) or connection (TCP) of every
	// tenant's listeners to Envoy's stdout; off unless enabled (an addition; ignorable).
	// +optional
	AccessLog *AccessLog `json:"accessLog,omitempty"`

	// Image of the Envoy proxy (an addition; ignorable). Defaults to the manager's flag.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`
}

// GracefulShutdown controls how Envoy drains before it stops.
type GracefulShutdown struct {
	// +optional
	Disabled bool `json:"disabled,omitempty"`
	// DrainTimeout is how long Envoy drains listeners.
	// +optional
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`
	// MinDrainDuration is the least time Envoy drains.
	// +optional
	MinDrainDuration *metav1.Duration `json:"minDrainDuration,omitempty"`
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// OverloadManager configures Envoy's overload manager.
type OverloadManager struct {
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// +optional
	MaxActiveDownstreamConnections *uint64 `json:"maxActiveDownstreamConnections,omitempty"`
	// +optional
	MaxHeapSizeBytes *uint64 `json:"maxHeapSizeBytes,omitempty"`
}

// PodMonitor asks for a Prometheus Operator PodMonitor that scrapes every tenant's Envoy pods
// on their stats port (9904, /stats/prometheus). The manager chart renders it from this
// setting (config.envoyProxy.podMonitor) when the PodMonitor CRD exists; the manager itself
// does not read it.
type PodMonitor struct {
	// +optional
	Enabled bool `json:"enabled,omitempty"`
}

// AccessLog turns the Envoy access log on or off.
type AccessLog struct {
	// Enabled writes the access log, JSON to Envoy's stdout.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
}

// HeaderLimits bounds request and response headers.
type HeaderLimits struct {
	// +optional
	MaxRequestHeadersKb *uint32 `json:"maxRequestHeadersKb,omitempty"`
	// +optional
	MaxRequestHeadersCount *uint32 `json:"maxRequestHeadersCount,omitempty"`
	// +optional
	MaxResponseHeadersKb *uint32 `json:"maxResponseHeadersKb,omitempty"`
}

// ConfigStatus reports the manager that reads the Config.
type ConfigStatus struct {
	// +optional
	Version Version `json:"version,omitempty"`
}

// Config holds the hub-wide settings; one named "default" in the manager's namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=klconfig,categories=kubelb
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version.gitVersion`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Config struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ConfigSpec `json:"spec,omitempty"`
	// +optional
	Status ConfigStatus `json:"status,omitempty"`
}

// ConfigList is a list of Configs.
// +kubebuilder:object:root=true
type ConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Config `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Config{}, &ConfigList{})
}
