package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LoadBalancerSpec is what a tenant asks of a layer-4 load balancer.
type LoadBalancerSpec struct {
	// Endpoints are the tenant addresses and ports traffic is sent to. For a mirrored
	// Service the ports are its NodePorts and the addresses come from Addresses/default.
	// +kubebuilder:validation:MinItems=1
	// At most 4 groups (a ccm writes one).
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	Endpoints []LoadBalancerEndpoints `json:"endpoints"`

	// Ports the load balancer exposes.
	// +optional
	// At most 128.
	// +kubebuilder:validation:MaxItems=128
	// +listType=atomic
	Ports []LoadBalancerPort `json:"ports,omitempty"`

	// Hostname asked for the load balancer.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Hostname string `json:"hostname,omitempty"`

	// Type of the hub Service that exposes the load balancer.
	// +kubebuilder:default=ClusterIP
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`

	// ExternalTrafficPolicy of the tenant Service.
	// +optional
	ExternalTrafficPolicy corev1.ServiceExternalTrafficPolicy `json:"externalTrafficPolicy,omitempty"`

	// HealthCheckNodePort is the tenant Service's spec.healthCheckNodePort, set by the ccm
	// when the Service has externalTrafficPolicy Local: on every node, kube-proxy answers
	// GET /healthz on this port with 200 while the node has a local endpoint of the Service
	// and 503 otherwise. The hub then health-checks each node there (TCP and UDP ports
	// alike), so a node without local endpoints gets no new connections. Unset: nodes are
	// checked as before. (An addition to the KubeLB CE contract; KubeLB CE ignores it.)
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	HealthCheckNodePort int32 `json:"healthCheckNodePort,omitempty"`

	// Persistence asks for session persistence.
	// +optional
	Persistence *Persistence `json:"persistence,omitempty"`

	// IPFamilyPolicy is the tenant Service's spec.ipFamilyPolicy, set by the ccm: the hub
	// Service asks for the same (SingleStack, PreferDualStack or RequireDualStack). Unset: the
	// hub Service takes the hub's default. (An addition to the KubeLB CE contract; KubeLB CE
	// ignores it.)
	// +optional
	// +kubebuilder:validation:Enum=SingleStack;PreferDualStack;RequireDualStack
	IPFamilyPolicy *corev1.IPFamilyPolicy `json:"ipFamilyPolicy,omitempty"`

	// IPFamilies is the tenant Service's spec.ipFamilies (IPv4, IPv6; at most two, no
	// repeats), set by the ccm: the hub Service asks for the same families in the same order.
	// Unset: the hub's default. (An addition to the KubeLB CE contract; KubeLB CE ignores it.)
	// +optional
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:Enum=IPv4;IPv6
	// +kubebuilder:validation:XValidation:rule="self.size() < 2 || self[0] != self[1]",message="ipFamilies must not repeat a family"
	// +listType=atomic
	IPFamilies []corev1.IPFamily `json:"ipFamilies,omitempty"`

	// SourceRanges are the client address ranges (CIDRs such as "203.0.113.0/24" or
	// "2001:db8::/32") allowed to reach the load balancer: the tenant Service's
	// spec.loadBalancerSourceRanges, or its annotation
	// service.beta.kubernetes.io/load-balancer-source-ranges when that list is empty, set by
	// the ccm. Unset or empty: every client. The hub's Envoy refuses connections (TCP),
	// datagrams (UDP) and requests on the hostname (HTTP 403) from any other address. An
	// entry that is not a CIDR makes the hub refuse all of the load balancer's traffic until
	// it is fixed (fail closed: a restriction never silently widens). The hub Service gets
	// externalTrafficPolicy Local so that the client address reaches Envoy. (An addition to
	// the KubeLB CE contract; KubeLB CE ignores it.)
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=atomic
	SourceRanges []string `json:"sourceRanges,omitempty"`
}

// MaxSourceRanges bounds LoadBalancerSpec.SourceRanges.
const MaxSourceRanges = 64

// MaxSourceRangeLength bounds an entry of LoadBalancerSpec.SourceRanges.
const MaxSourceRangeLength = 64

// AnnotationLoadBalancerSourceRanges is the Service annotation Kubernetes honours as the
// allowed client ranges (comma-separated CIDRs) when spec.loadBalancerSourceRanges is empty.
const AnnotationLoadBalancerSourceRanges = corev1.AnnotationLoadBalancerSourceRangesKey

// LoadBalancerPort is a port a load balancer exposes.
type LoadBalancerPort struct {
	// Name of the port; must match an endpoint port name when several ports are exposed.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// Protocol of the port: TCP or UDP.
	// +kubebuilder:validation:Enum=TCP;UDP
	// +kubebuilder:default=TCP
	// +optional
	Protocol corev1.Protocol `json:"protocol,omitempty"`

	// Port number exposed.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// PersistenceType names a kind of session persistence.
// +kubebuilder:validation:Enum=SourceIP
type PersistenceType string

// PersistenceSourceIP keeps a client on one endpoint by its source address.
const PersistenceSourceIP PersistenceType = "SourceIP"

// Persistence asks for session persistence.
type Persistence struct {
	// Type of persistence.
	Type PersistenceType `json:"type"`
}

// LoadBalancerStatus is what the hub reports of a load balancer.
type LoadBalancerStatus struct {
	// LoadBalancer holds the ingress addresses the tenant Service must show.
	// +optional
	// At most 16 ingress addresses.
	// +kubebuilder:validation:XValidation:rule="!has(self.ingress) || self.ingress.size() <= 16",message="at most 16 ingress addresses"
	LoadBalancer corev1.LoadBalancerStatus `json:"loadBalancer,omitempty"`

	// Service describes the hub Service of the load balancer.
	// +optional
	Service ServiceStatus `json:"service,omitempty"`

	// Hostname assigned to the load balancer.
	// +optional
	Hostname *HostnameStatus `json:"hostname,omitempty"`

	// Conditions of the load balancer (an addition to the contract; ignorable). Types:
	// Ready: whether the hub Service exposes every port with an address. True reasons:
	// AddressAssigned; NoExternalAddress (spec.type ClusterIP or NodePort, no address asked).
	// False reasons: WaitingForAddress (nothing on the hub serves the hub Service's
	// load-balancer class), UnsupportedType, NodePortsNotAllowed, PortsExhausted (no listener
	// port left), LoadBalancingDisabled (by the Tenant or Config), NoPorts, InvalidPorts
	// (repeated ports left out), ServiceFailed (the hub Service was rejected),
	// IPFamilyUnavailable, QuotaExceeded (the tenant's limits).
	// Hostname (only with a hostname): HostnameAssigned (True); InvalidHostname,
	// HostnameConflict (an older LoadBalancer holds it), CertificateFailed, HostnameNotServed
	// (the tenant's Ingress Service, which serves it, cannot be made) (False).
	// Programmed (written by the leader): whether the tenant's Envoy proxies hold the
	// configuration. True reasons: Programmed, ProgrammedWithWarnings (some input ignored, see
	// the message). False reasons: Rejected (an Envoy proxy NACKed it; see the TenantState's
	// status.rejections), or a translation problem's reason.
	// A False Programmed condition may also take the reason of the first translation problem:
	// InvalidName, UnsupportedProtocol, InvalidPort, PortNotAllocated, ListenerPortConflict,
	// AddressesNotFound, InvalidAddress, EndpointDenied, EndpointPortNotFound, NoEndpoints,
	// InvalidAnnotation, UnsupportedAnnotation, ProxyProtocolUnsupported, UnsupportedPersistence,
	// QuotaExceeded, InvalidSourceRanges, ClientAddressUnknown,
	// HealthCheckThrottled, HostnameNotResolved, LoadBalancingDisabled, InvalidHostname,
	// HostnameConflict, HostnameNoHTTPPort, InvalidRoute, BackendNotFound, BackendNoNodePort,
	// CertificateNotFound, InvalidCertificate, ListenerPortNotAllocated, InvalidHost,
	// InvalidPath, PathConflict, CertificateConflict, UnsupportedBackend, InvalidTLS,
	// InvalidListener, InvalidRule, UnsupportedFilter, TooMany, ListenerTaken,
	// OverPlatformBound, InvalidConfig (each explained in docs/conditions.md); the message
	// lists every problem.
	// BackendsReachable (written by the leader): whether the tenant's Envoy proxies reach the
	// endpoints in their health checks. True reason: Reachable. False reasons:
	// SomeBackendsUnreachable (the message names them), NoBackendReachable. Unknown reasons:
	// NotYetChecked, TooManyEndpoints (the tenant has more endpoints than the proxies check),
	// HealthNotReported (more of the tenant's clusters have unreachable endpoints than a
	// manager replica reports, and this one's were left out).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation the status describes (an addition; ignorable).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ServiceStatus lists the ports of the hub Service of a load balancer.
type ServiceStatus struct {
	// +optional
	// At most 128, as the LoadBalancer's ports.
	// +kubebuilder:validation:MaxItems=128
	// +listType=atomic
	Ports []ServicePort `json:"ports,omitempty"`

	// IPFamilies are the IP families the hub Service got (its spec.ipFamilies), in its
	// order: the families the load balancer is served on. (An addition to the contract;
	// ignorable.)
	// +optional
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:Enum=IPv4;IPv6
	// +listType=atomic
	IPFamilies []corev1.IPFamily `json:"ipFamilies,omitempty"`
}

// ServicePort is a hub Service port with the listener port allocated on the Envoy fleet.
type ServicePort struct {
	corev1.ServicePort `json:",inline"`

	// UpstreamTargetPort is the listener port allocated on the tenant's Envoy fleet.
	UpstreamTargetPort int32 `json:"upstreamTargetPort"`
}

// HostnameStatus reports the hostname of a load balancer.
type HostnameStatus struct {
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Hostname string `json:"hostname,omitempty"`
	// +optional
	TLSEnabled bool `json:"tlsEnabled,omitempty"`
	// +optional
	DNSRecordCreated bool `json:"dnsRecordCreated,omitempty"`
}

// LoadBalancer mirrors a tenant Service of type LoadBalancer into the hub.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lb,categories=kubelb
// +kubebuilder:printcolumn:name="OriginName",type=string,JSONPath=`.metadata.labels.kubelb\.k8c\.io/origin-name`
// +kubebuilder:printcolumn:name="OriginNamespace",type=string,JSONPath=`.metadata.labels.kubelb\.k8c\.io/origin-ns`
// +kubebuilder:printcolumn:name="Hostname",type=string,JSONPath=`.status.hostname.hostname`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.loadBalancer.ingress[*].ip`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Programmed",type=string,JSONPath=`.status.conditions[?(@.type=="Programmed")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LoadBalancer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LoadBalancerSpec   `json:"spec,omitempty"`
	Status LoadBalancerStatus `json:"status,omitempty"`
}

// LoadBalancerList is a list of LoadBalancers.
// +kubebuilder:object:root=true
type LoadBalancerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LoadBalancer `json:"items"`
}

func init() {
	SchemeBuilder.Register(&LoadBalancer{}, &LoadBalancerList{})
}
