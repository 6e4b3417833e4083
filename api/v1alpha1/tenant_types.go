package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TenantSpec holds a tenant's settings; they override the Config.
type TenantSpec struct {
	AnnotationSettings `json:",inline"`

	// +optional
	EnvoyProxy TenantEnvoyProxy `json:"envoyProxy,omitempty"`
	// +optional
	LoadBalancer LoadBalancerSettings `json:"loadBalancer,omitempty"`
	// +optional
	Ingress IngressSettings `json:"ingress,omitempty"`
	// +optional
	GatewayAPI TenantGatewayAPISettings `json:"gatewayAPI,omitempty"`
	// +optional
	DNS DNSSettings `json:"dns,omitempty"`
	// +optional
	Certificates CertificatesSettings `json:"certificates,omitempty"`
	// EndpointPolicy of this tenant: its allow list, when set, replaces the Config's allow
	// list, and its deny list, when set, replaces the Config's deny list.
	// +optional
	EndpointPolicy *EndpointPolicy `json:"endpointPolicy,omitempty"`
	// Limits of this tenant: each field set overrides the Config's.
	// +optional
	Limits Limits `json:"limits,omitempty"`
	// Upstream tunes the Envoy clusters towards the tenant's nodes (connect timeout, health
	// check, UDP idle timeout, connection limit): each field set overrides the Config's.
	// +optional
	Upstream UpstreamSettings `json:"upstream,omitempty"`
	// HTTP tunes the tenant's HTTP routes (request and stream idle timeouts): each field set
	// overrides the Config's.
	// +optional
	HTTP HTTPSettings `json:"http,omitempty"`
	// TrafficPolicies bound the traffic policies (BackendTrafficPolicy, SecurityPolicy) the
	// tenant may use: each field set overrides the Config's.
	// +optional
	TrafficPolicies *TrafficPolicyBounds `json:"trafficPolicies,omitempty"`
}

// TenantEnvoyProxy overrides the Envoy fleet settings for one tenant.
type TenantEnvoyProxy struct {
	// Replicas of the tenant's Envoy Deployment.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Resources of the Envoy container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// HeaderLimits bound the request headers of the tenant's HTTP listeners; when set, they
	// replace the Config's spec.envoyProxy.headerLimits (an addition; ignorable).
	// +optional
	HeaderLimits *HeaderLimits `json:"headerLimits,omitempty"`

	// AccessLog of the tenant's listeners; when set, it replaces the Config's
	// spec.envoyProxy.accessLog (an addition; ignorable).
	// +optional
	AccessLog *AccessLog `json:"accessLog,omitempty"`
}

// Tenant phases.
const (
	TenantPhaseProvisioning = "Provisioning"
	TenantPhaseReady        = "Ready"
	TenantPhaseTerminating  = "Terminating"
	TenantPhaseFailed       = "Failed"
)

// TenantGatewayAPISettings are a tenant's Gateway API settings: those a Config has too, and
// the static addresses only a Tenant grants.
type TenantGatewayAPISettings struct {
	GatewayAPISettings `json:",inline"`

	// StaticAddresses are the addresses the tenant's Gateways may ask for in spec.addresses
	// (type IPAddress with a value): IP addresses and CIDRs, written by the platform team.
	// The manager asks the hub's load balancer for an asked address inside them that no other
	// hub Service holds or asks for (spec.loadBalancerIP of the Gateway's hub Service); any
	// other asked address leaves the Gateway not Programmed (AddressNotUsable). Grant only
	// addresses of the hub load balancer's range that nothing else uses: unset, a tenant may
	// ask for none. An addition to the KubeLB CE API; ignorable.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="self.all(a, isIP(a) || isCIDR(a))",message="every entry must be an IP address or a CIDR, e.g. 192.0.2.10 or 192.0.2.0/28"
	// +listType=atomic
	StaticAddresses []string `json:"staticAddresses,omitempty"`
}

// TenantStatus reports the onboarding of a tenant.
type TenantStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Phase string `json:"phase,omitempty"`
	// Conditions of the tenant. Ready: whether the tenant is onboarded.
	// True reason: Provisioned (namespace, RBAC, the ccm's kubeconfig Secret and TenantState in
	// place). False reasons: Provisioning (creating objects or retrying), NoHubServerURL (set
	// --tenant-kubeconfig-server), InvalidName, NamespaceConflict (tenant-<name> has another
	// owner), NamespaceTerminating, ServiceAccountRevoked, TokenRequestFailed; while deleting:
	// WaitingForTenantObjects, WaitingForNamespace, ForeignFinalizers (finalizers kubelb does
	// not remove; the message names them). LimitsNearlyReached: whether the tenant's objects
	// take 80% or more of one of its limits (the message has the numbers); True reasons:
	// NearLimit, LimitReached (objects are refused: QuotaExceeded); False reason: WithinLimits.
	// See docs/conditions.md.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LoadBalancers is the number of LoadBalancers in the tenant's namespace. The manager
	// writes it when it changes, at most about once per 10 seconds per tenant, so it may lag a
	// burst of changes by that much.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LoadBalancers int32 `json:"loadBalancers,omitempty"`
	// Routes is the number of Routes in the tenant's namespace, written like LoadBalancers.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Routes int32 `json:"routes,omitempty"`
}

// Tenant onboards a tenant cluster: the manager makes namespace tenant-<name>, the ccm's RBAC
// and kubeconfig.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=kltenant,categories=kubelb
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="LoadBalancers",type=integer,JSONPath=`.status.loadBalancers`
// +kubebuilder:printcolumn:name="Routes",type=integer,JSONPath=`.status.routes`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Tenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec TenantSpec `json:"spec,omitempty"`
	// +optional
	Status TenantStatus `json:"status,omitempty"`
}

// TenantList is a list of Tenants.
// +kubebuilder:object:root=true
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tenant `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Tenant{}, &TenantList{})
}
