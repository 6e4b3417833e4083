package tenant

import (
	"time"

	"kubelb.dev/kubelb/internal/quota"
)

// Names of the objects the controller makes in a tenant namespace.
const (
	// ServiceAccountName is the hub identity of the tenant's ccm.
	ServiceAccountName = "kubelb-ccm"
	// RoleName is the Role that confines the ccm to its tenant namespace.
	RoleName = "kubelb-ccm"
	// RoleBindingName binds RoleName to ServiceAccountName.
	RoleBindingName = "kubelb-ccm"
	// AppName is the value of hubnames.LabelAppName on the ccm access objects (ServiceAccount,
	// Role, RoleBinding, kubeconfig Secret); the controller caches only objects with it.
	AppName = "kubelb-ccm"
	// NetworkPolicyName is the NetworkPolicy of the tenant's Envoy fleet.
	NetworkPolicyName = "kubelb-envoy"
	// ResourceQuotaName is the ResourceQuota that bounds the tenant's object counts.
	ResourceQuotaName = "kubelb-tenant"

	// AnnotationTokenIssuedAt and AnnotationTokenExpiresAt (RFC 3339) on the kubeconfig
	// Secret record the lifetime of the token inside it.
	AnnotationTokenIssuedAt  = "kubelb.k8c.io/token-issued-at"
	AnnotationTokenExpiresAt = "kubelb.k8c.io/token-expires-at"
	// AnnotationServiceAccountUID records which ServiceAccount the token belongs to; a
	// re-created ServiceAccount invalidates it.
	AnnotationServiceAccountUID = "kubelb.k8c.io/service-account-uid"

	// ClusterInfoNamespace and ClusterInfoName locate the public cluster-info ConfigMap
	// (kubeadm and most distributions publish it) whose "kubeconfig" key gives the API
	// server URL and CA when Options.HubAPIServerURL is not set.
	ClusterInfoNamespace = "kube-public"
	ClusterInfoName      = "cluster-info"
	clusterInfoKey       = "kubeconfig"
)

// Token lifetimes.
const (
	// DefaultTokenTTL is the lifetime asked for the ccm's token.
	DefaultTokenTTL = 24 * time.Hour
	// MinTokenTTL is the shortest lifetime the TokenRequest API accepts.
	MinTokenTTL = 10 * time.Minute
	// refreshFraction of a token's lifetime passes before it is replaced.
	refreshFraction = 0.8
	// serviceAccountRecreateDelay is how long a deleted ccm ServiceAccount stays deleted: longer
	// than kube-apiserver keeps accepting tokens it has authenticated after their
	// ServiceAccount is gone (its token cache holds successes for 10 s), so that no revoked
	// token can request one for the new ServiceAccount.
	serviceAccountRecreateDelay = 12 * time.Second
)

// Options configure the Tenant controller (from cmd/kubelb flags).
type Options struct {
	// Namespace the manager runs in; holds Config "default".
	Namespace string
	// HubAPIServerURL is the API server URL written into the ccm kubeconfig; empty means
	// take it from kube-public/cluster-info.
	HubAPIServerURL string
	// TokenTTL is the lifetime of the ccm's token (default DefaultTokenTTL, at least
	// MinTokenTTL); it is replaced after 80% of it.
	TokenTTL time.Duration
	// NetworkPolicy shapes the NetworkPolicy NetworkPolicyName the controller keeps in every
	// tenant namespace (on unless Disabled).
	NetworkPolicy NetworkPolicyOptions
	// keepOwnerReferences leaves owner references on tenant objects to the deletion of the
	// Tenant they name (tests of that path only): no ownerrefs controller.
	keepOwnerReferences bool
	// Verdicts reads what each tenant's objects ask for of its limits (LimitsNearlyReached);
	// the manager passes the Envoy control plane's, so that each object's share is worked out
	// once for both. Nil: the controller makes its own.
	Verdicts *quota.Store
	// countsInterval is the least time between two writes of a Tenant's counts (default
	// DefaultCountsInterval; tests shorten it).
	countsInterval time.Duration
}

// NetworkPolicyOptions shape the NetworkPolicy of the Envoy fleets (DesiredNetworkPolicy):
// the Envoy pods may send traffic only to EgressCIDRs minus ExceptCIDRs (the tenants' node
// addresses), to the manager pods' xDS port, and to the cluster DNS.
type NetworkPolicyOptions struct {
	// Disabled: no policy is made, and one the controller made is deleted.
	Disabled bool
	// EgressCIDRs are where tenant nodes may be (default DefaultEgressCIDRs).
	EgressCIDRs []string
	// ExceptCIDRs are hub ranges carved out of EgressCIDRs, each from the CIDRs of its
	// address family (nil: DefaultExceptCIDRs; empty: none).
	ExceptCIDRs []string
	// XDSPort is the port the manager's xDS server listens on in its pods (default 8001).
	XDSPort int32
	// ManagerPodLabels select the manager's pods in its namespace (empty: every pod of it).
	ManagerPodLabels map[string]string
	// DNSNamespace and DNSPodLabels select the cluster DNS pods, which the Envoy pods may
	// query on port 53 (the bootstrap resolves the xDS Service name); an empty DNSNamespace
	// allows no DNS.
	DNSNamespace string
	DNSPodLabels map[string]string
}

// Defaults of the NetworkPolicy (the manager's flags default to them too).
var (
	// DefaultEgressCIDRs: the controller cannot know the tenants' node addresses.
	DefaultEgressCIDRs = []string{"0.0.0.0/0", "::/0"}
	// DefaultExceptCIDRs: link-local, where cloud metadata services live.
	DefaultExceptCIDRs = []string{"169.254.0.0/16", "fe80::/10"}
)

// DefaultXDSPort is the xDS port of the manager's pods when none is given.
const DefaultXDSPort = 8001

func (o Options) withDefaults() Options {
	if o.TokenTTL == 0 {
		o.TokenTTL = DefaultTokenTTL
	}
	if o.NetworkPolicy.EgressCIDRs == nil {
		o.NetworkPolicy.EgressCIDRs = DefaultEgressCIDRs
	}
	if o.NetworkPolicy.ExceptCIDRs == nil {
		o.NetworkPolicy.ExceptCIDRs = DefaultExceptCIDRs
	}
	if o.countsInterval == 0 {
		o.countsInterval = DefaultCountsInterval
	}
	if o.NetworkPolicy.XDSPort == 0 {
		o.NetworkPolicy.XDSPort = DefaultXDSPort
	}
	return o
}
