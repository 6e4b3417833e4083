package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Service annotations of the address pools (internal/ipam). They are read in a standalone ccm
// only (ccm --mode=standalone --address-provider=ipam): in the hub the tenant's settings
// decide, never an annotation a tenant wrote.
const (
	// AnnotationAddressPool names the AddressPool a Service takes its addresses from (none:
	// the default pool).
	AnnotationAddressPool = "kubelb.k8c.io/address-pool"
	// AnnotationLoadBalancerIPs requests addresses, comma-separated, at most one per IP
	// family (spec.loadBalancerIP requests one too).
	AnnotationLoadBalancerIPs = "kubelb.k8c.io/load-balancer-ips"
	// AnnotationAllowSharedIP is a sharing key: Services of one pool with the same key share
	// an address when their (protocol, port) pairs differ.
	AnnotationAllowSharedIP = "kubelb.k8c.io/allow-shared-ip"
)

// Condition types and reasons of an AddressPool.
const (
	// AddressPoolConditionReady is True when every entry of spec.addresses is valid.
	AddressPoolConditionReady = "Ready"
	// AddressPoolConditionDefault is set on a pool with spec.default: True when it is the
	// default pool, False (reason AddressPoolReasonNotDefault) when an older default pool
	// wins.
	AddressPoolConditionDefault = "Default"

	AddressPoolReasonValid            = "Valid"
	AddressPoolReasonInvalidAddresses = "InvalidAddresses"
	AddressPoolReasonDefault          = "Default"
	AddressPoolReasonNotDefault       = "AnotherDefaultPool"
)

// MaxAddressPoolEntries bounds spec.addresses of an AddressPool.
const MaxAddressPoolEntries = 64

// AddressPoolSpec lists the addresses a pool hands out.
type AddressPoolSpec struct {
	// Addresses of the pool: each entry a CIDR (10.0.0.0/28, fd00::/120; every address of
	// it is handed out, network and broadcast addresses included) or a range of one family
	// written A-B (10.0.0.10-10.0.0.20, both ends included). IPv4 and IPv6 entries may be
	// mixed: a dual-stack Service takes one address of each. Entries the manager cannot read
	// are ignored and named in the Ready condition.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=100
	// +listType=atomic
	Addresses []string `json:"addresses"`

	// Default makes this the pool of the Services that name none. When several pools are
	// default, the oldest (then the first by name) is; the others say so in their Default
	// condition.
	// +optional
	Default bool `json:"default,omitempty"`

	// AllowedNamespaces, when set, are the only namespaces whose Services may take
	// addresses from the pool (in the hub: the tenants' namespaces, tenant-<name>); a Service
	// of another namespace that names the pool, or whose default it is, stays pending.
	// Unset or empty: every namespace.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`
}

// AddressPoolFamilyStatus counts one IP family of a pool.
type AddressPoolFamilyStatus struct {
	// Size is the number of addresses of the family in the pool, in decimal (an IPv6 pool
	// may hold more than an int64 counts).
	// +kubebuilder:validation:MaxLength=40
	Size string `json:"size"`
	// Allocated is the number of those addresses held by Services.
	Allocated int64 `json:"allocated"`
}

// AddressPoolStatus reports a pool's validity and use.
type AddressPoolStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// IPv4 counts the pool's IPv4 addresses; absent when it has none.
	// +optional
	IPv4 *AddressPoolFamilyStatus `json:"ipv4,omitempty"`
	// IPv6 counts the pool's IPv6 addresses; absent when it has none.
	// +optional
	IPv6 *AddressPoolFamilyStatus `json:"ipv6,omitempty"`
	// Conditions of the pool. Ready: Valid (True, every entry of spec.addresses is valid) or
	// InvalidAddresses (False, the message names the entries left out). Default (on a pool
	// with spec.default): Default (True, it is the default pool) or AnotherDefaultPool (False,
	// an older default pool wins).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AddressPool is a set of IPv4 and IPv6 addresses that kubelb hands out to Services of type
// LoadBalancer (--address-provider=ipam): the hub's Envoy Services in the manager, or the
// cluster's own Services in a standalone ccm. Announcing the addresses (ARP, BGP) is left to
// a router, kube-vip or a BGP speaker (docs/modes.md).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=klpool,categories=kubelb
// +kubebuilder:printcolumn:name="Default",type=boolean,JSONPath=`.spec.default`
// +kubebuilder:printcolumn:name="IPv4 Size",type=string,JSONPath=`.status.ipv4.size`
// +kubebuilder:printcolumn:name="IPv4 Allocated",type=integer,JSONPath=`.status.ipv4.allocated`
// +kubebuilder:printcolumn:name="IPv6 Size",type=string,JSONPath=`.status.ipv6.size`,priority=1
// +kubebuilder:printcolumn:name="IPv6 Allocated",type=integer,JSONPath=`.status.ipv6.allocated`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AddressPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AddressPoolSpec `json:"spec"`
	// +optional
	Status AddressPoolStatus `json:"status,omitempty"`
}

// AddressPoolList is a list of AddressPools.
// +kubebuilder:object:root=true
type AddressPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AddressPool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AddressPool{}, &AddressPoolList{})
}
