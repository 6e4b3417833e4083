package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TenantStateSpec is empty: TenantState is written by the manager into its status.
type TenantStateSpec struct{}

// TenantStateStatus tells a tenant's ccm what the hub allows.
type TenantStateStatus struct {
	// Version of the manager.
	// +optional
	Version Version `json:"version,omitempty"`

	// LastUpdated is when the manager last wrote this status.
	// +optional
	LastUpdated metav1.Time `json:"lastUpdated,omitempty"`

	// Conditions of the tenant on the hub. Ready: whether the hub serves the tenant, with the
	// reason of the Tenant's Ready condition.
	// True reason: Provisioned (namespace, RBAC, the ccm's kubeconfig Secret and TenantState in
	// place). False reasons: Provisioning (creating objects or retrying), NoHubServerURL (set
	// --tenant-kubeconfig-server), InvalidName, NamespaceConflict (tenant-<name> has another
	// owner), NamespaceTerminating, ServiceAccountRevoked, TokenRequestFailed; while deleting:
	// WaitingForTenantObjects, WaitingForNamespace, ForeignFinalizers (finalizers kubelb does
	// not remove; the message names them). See docs/conditions.md.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LoadBalancer tells whether layer-4 load balancing is allowed.
	// +optional
	LoadBalancer LoadBalancerState `json:"loadBalancer,omitempty"`

	// TrafficPolicies are the bounds of spec.trafficPolicies of the Tenant and the Config
	// that apply to the tenant's traffic policies (nil: none): the ccm reports a policy over
	// one on the policy (Accepted False, OverPlatformBound); the hub leaves such a policy out
	// of the tenant's configuration. An addition to the contract (ignorable).
	// +optional
	TrafficPolicies *TenantTrafficPolicyBounds `json:"trafficPolicies,omitempty"`

	// Rejections are the configurations the tenant's Envoy proxies rejected (NACKs), each
	// written by the manager replica the proxy is connected to; the leader turns them into
	// conditions on the objects whose resources were rejected. An addition to the contract
	// (ignorable).
	// +optional
	// +listType=map
	// +listMapKey=proxy
	// +listMapKey=typeURL
	// +kubebuilder:validation:MaxItems=256
	Rejections []ConfigRejection `json:"rejections,omitempty"`

	// BackendHealth is what the tenant's Envoy proxies found when they health-checked the
	// tenant's endpoints (Envoy's health discovery service), one entry per manager replica
	// and Envoy cluster the replica's proxies reported on; the leader turns them into the
	// BackendsReachable condition of each LoadBalancer. An addition to the contract
	// (ignorable).
	// +optional
	// +listType=map
	// +listMapKey=replica
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=1024
	BackendHealth []BackendHealth `json:"backendHealth,omitempty"`

	// BackendHealthOmitted says, per manager replica, how many clusters its proxies reported
	// on that it left out of BackendHealth (a replica writes at most 256 entries per tenant,
	// those naming unreachable endpoints first): the leader tells the objects of clusters
	// without an entry that their health was not reported, rather than that it is not
	// checked yet. An addition to the contract (ignorable).
	// +optional
	// +listType=map
	// +listMapKey=replica
	// +kubebuilder:validation:MaxItems=64
	BackendHealthOmitted []BackendHealthOmitted `json:"backendHealthOmitted,omitempty"`
}

// BackendHealthOmitted is how many clusters one manager replica left out of BackendHealth.
type BackendHealthOmitted struct {
	// Replica is the manager replica.
	// +kubebuilder:validation:MaxLength=253
	Replica string `json:"replica"`
	// Clusters is the number of clusters left out.
	// +kubebuilder:validation:Minimum=1
	Clusters int32 `json:"clusters"`
	// Time it last changed, or was confirmed (with the entries naming unreachable endpoints).
	// +optional
	Time metav1.Time `json:"time,omitempty"`
}

// BackendHealth is what the proxies connected to one manager replica found of the endpoints
// of one Envoy cluster.
type BackendHealth struct {
	// Replica is the manager replica the proxies are connected to.
	// +kubebuilder:validation:MaxLength=253
	Replica string `json:"replica"`
	// Cluster is the Envoy cluster whose endpoints were checked.
	// +kubebuilder:validation:MaxLength=256
	Cluster string `json:"cluster"`
	// Endpoints identifies the set of endpoints that was checked (a hash of their
	// addresses, the same on every replica): an entry about another set than the
	// cluster's current one is not used.
	// +kubebuilder:validation:MaxLength=64
	Endpoints string `json:"endpoints"`
	// Reachable is the number of endpoints every reporting proxy reached.
	// +optional
	Reachable int32 `json:"reachable,omitempty"`
	// UnreachableCount is the number of endpoints at least one proxy could not reach.
	// +optional
	UnreachableCount int32 `json:"unreachableCount,omitempty"`
	// Unreachable names (address:port) the first of those, sorted.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=64
	Unreachable []string `json:"unreachable,omitempty"`
	// Time the entry last changed, or was confirmed while it names unreachable endpoints.
	// +optional
	Time metav1.Time `json:"time,omitempty"`
}

// ConfigRejection is one Envoy proxy's rejection of the resources of one xDS type.
type ConfigRejection struct {
	// Proxy is the node id of the Envoy proxy.
	// +kubebuilder:validation:MaxLength=253
	Proxy string `json:"proxy"`
	// TypeURL of the rejected resources.
	// +kubebuilder:validation:MaxLength=256
	TypeURL string `json:"typeURL"`
	// Version of those resources that was rejected (a content hash, the same on every
	// replica); empty when not known.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`
	// Message is Envoy's error detail (shortened); it names the rejected resources.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
	// Replica is the manager replica the proxy is connected to.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Replica string `json:"replica,omitempty"`
	// Time of the rejection.
	// +optional
	Time metav1.Time `json:"time,omitempty"`
}

// Condition types of a TenantState that tell the ccm whether the hub serves the tenant's
// Ingresses and Gateway API objects: True (reason TenantStateReasonAllowed) or False (reason
// TenantStateReasonDisabled: the Tenant's or the Config's ingress.disable or
// gatewayAPI.disable). A TenantState without them (an older manager) allows both.
const (
	TenantStateConditionIngress    = "IngressAllowed"
	TenantStateConditionGatewayAPI = "GatewayAPIAllowed"
	TenantStateReasonAllowed       = "Allowed"
	TenantStateReasonDisabled      = "Disabled"
)

// LoadBalancerState tells whether layer-4 load balancing is allowed.
type LoadBalancerState struct {
	// +optional
	Disable bool `json:"disable,omitempty"`
}

// TenantState is the hub's view of a tenant, read by the tenant's ccm.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=klstate,categories=kubelb
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version.gitVersion`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="L4 Disabled",type=boolean,JSONPath=`.status.loadBalancer.disable`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TenantState struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec TenantStateSpec `json:"spec,omitempty"`
	// +optional
	Status TenantStateStatus `json:"status,omitempty"`
}

// TenantStateList is a list of TenantStates.
// +kubebuilder:object:root=true
type TenantStateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TenantState `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TenantState{}, &TenantStateList{})
}
