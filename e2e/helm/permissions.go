package helm

import "slices"

var (
	crud    = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	read    = []string{"get", "list", "watch"}
	mirror  = []string{"get", "list", "watch", "update", "patch"}
	status  = []string{"get", "update", "patch"}
	publish = []string{"create", "patch", "update"}
)

// ManagerPermissions is what the manager holds beyond its controllers' +kubebuilder:rbac
// markers (MarkerPermissions, which the chart renders as they are): leader election in its
// own namespace, the lease and the core Events controller-runtime's leader election records.
// namespace is the manager's own.
func ManagerPermissions(namespace string) []Permission {
	var ps []Permission
	ps = append(ps, Permissions("coordination.k8s.io", []string{"leases"}, crud, namespace)...)
	ps = append(ps, Permissions("", []string{"events"}, []string{"create", "patch"}, namespace)...)
	return ps
}

// ManagerForbidden is what the manager must not be able to do: elsewhere is a namespace that
// is neither the manager's nor a tenant's, tenantNS a tenant namespace. (Writes RBAC grants in
// every namespace but the admission policy refuses outside kubelb's namespaces are shown with
// real requests, not here: an access review sees RBAC only.)
func ManagerForbidden(elsewhere, tenantNS string) []Permission {
	var ps []Permission
	add := func(p ...Permission) { ps = append(ps, p...) }
	add(Permissions("", []string{"nodes"}, []string{"update", "patch", "delete"}, "")...)
	add(Permissions("", []string{"pods"}, []string{"create", "delete"}, "")...)
	add(Permissions("", []string{"pods/exec"}, []string{"create"}, "")...)
	add(Permissions("apiextensions.k8s.io", []string{"customresourcedefinitions"}, []string{"create", "update", "delete"}, "")...)
	add(Permissions("rbac.authorization.k8s.io", []string{"clusterroles", "clusterrolebindings"}, []string{"create", "update", "escalate", "bind"}, "")...)
	add(Permissions("rbac.authorization.k8s.io", []string{"roles"}, []string{"escalate", "bind"}, "")...)
	add(Permissions("", []string{"users", "groups", "serviceaccounts"}, []string{"impersonate"}, "")...)
	add(Permissions("coordination.k8s.io", []string{"leases"}, []string{"create", "update"}, "kube-system")...)
	add(Permissions("coordination.k8s.io", []string{"leases"}, []string{"create"}, elsewhere)...)
	add(Permissions("gateway.networking.k8s.io", []string{"gateways", "httproutes"}, []string{"get", "list", "create", "update", "delete"}, "")...)
	add(Permissions("admissionregistration.k8s.io", []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations",
		"validatingadmissionpolicies", "validatingadmissionpolicybindings"}, []string{"create", "update", "patch", "delete"}, "")...)
	// Tokens only for the ccm's ServiceAccount, kubelb-ccm: not for any other, not unnamed.
	for _, name := range []string{"", "default", "kubelb-manager"} {
		for _, n := range []string{tenantNS, elsewhere, "kube-system"} {
			add(Permission{Resource: "serviceaccounts", Subresource: "token", Verb: "create", Namespace: n, Name: name})
		}
	}
	// Secrets: nothing beyond get, list, watch, create, update, patch, delete.
	add(Permissions("", []string{"secrets"}, []string{"deletecollection"}, elsewhere)...)
	add(Permissions("", []string{"secrets"}, []string{"deletecollection"}, tenantNS)...)
	// Status the manager never writes, kinds it only reads or never creates.
	add(Permissions("", []string{"services/status", "namespaces/status", "namespaces/finalize"}, []string{"update", "patch"}, "")...)
	add(Permissions("kubelb.k8c.io", []string{"addresses/status", "configs/status"}, []string{"update", "patch"}, "")...)
	add(Permissions("kubelb.k8c.io", []string{"configs", "tenants"}, []string{"create", "delete", "deletecollection"}, "")...)
	add(Permissions("kubelb.k8c.io", []string{"configs"}, []string{"update", "patch"}, "")...)
	add(Permissions("", []string{"services", "secrets", "serviceaccounts", "namespaces"}, []string{"deletecollection"}, "")...)
	// Core Events only where leader election records them (its namespace), not elsewhere.
	add(Permissions("", []string{"events"}, []string{"create", "update"}, elsewhere)...)
	add(Permissions("events.k8s.io", []string{"events"}, []string{"update", "delete"}, "")...)
	return ps
}

// CCMFeatures are the optional parts of the ccm a chart install switched on.
type CCMFeatures struct {
	CloudProvider, Ingress, GatewayAPI, SecretSync, InstallGatewayCRDs bool
	// HubKubeconfigSecret is the Secret the ccm writes its renewed hub token back into
	// (kubelb.persistRenewedToken); "" when off.
	HubKubeconfigSecret string
}

// CCMPermissions is what the ccm does in the tenant cluster with the given features, by
// design; its controllers' markers (but for kubelb.k8c.io, which is the hub's) come on top.
func CCMPermissions(namespace string, f CCMFeatures) []Permission {
	var ps []Permission
	add := func(p ...Permission) { ps = append(ps, p...) }
	add(Permissions("", []string{"nodes"}, read, "")...)
	add(Permissions("", []string{"services"}, read, "")...)
	add(Permissions("", []string{"events"}, publish, "")...)
	add(Permissions("events.k8s.io", []string{"events"}, publish, "")...)
	add(Permissions("coordination.k8s.io", []string{"leases"}, crud, namespace)...)
	// LoadBalancer Services get the cleanup finalizer with or without the cloud provider;
	// their status is written only as the cloud provider.
	add(Permissions("", []string{"services"}, []string{"update", "patch"}, "")...)
	add(Permissions("", []string{"services/finalizers"}, []string{"update"}, "")...)
	if f.CloudProvider {
		add(Permissions("", []string{"services/status"}, status, "")...)
	}
	if f.Ingress || f.GatewayAPI {
		// NodePort twins of ClusterIP backends, and the copies of the EndpointSlices of
		// Services without a selector for them.
		add(Permissions("", []string{"services"}, []string{"create", "update", "patch", "delete"}, "")...)
		add(Permissions("discovery.k8s.io", []string{"endpointslices"}, crud, "")...)
	}
	if f.Ingress {
		add(Permissions("networking.k8s.io", []string{"ingresses"}, mirror, "")...)
		add(Permissions("networking.k8s.io", []string{"ingresses/status"}, status, "")...)
		add(Permissions("networking.k8s.io", []string{"ingressclasses"}, read, "")...)
		add(Permissions("networking.k8s.io", []string{"ingressclasses"}, []string{"create"}, "")...)
	}
	if f.GatewayAPI {
		add(Permissions("gateway.networking.k8s.io", []string{"gateways", "listenersets", "httproutes", "grpcroutes", "tlsroutes", "tcproutes", "udproutes"}, mirror, "")...)
		add(Permissions("gateway.networking.k8s.io", []string{"gateways/status", "listenersets/status", "httproutes/status", "grpcroutes/status",
			"tlsroutes/status", "tcproutes/status", "udproutes/status", "gatewayclasses/status"}, status, "")...)
		add(Permissions("gateway.networking.k8s.io", []string{"gatewayclasses", "referencegrants", "backendtlspolicies"}, read, "")...)
		add(Permissions("gateway.networking.k8s.io", []string{"backendtlspolicies/status"}, status, "")...)
		add(Permissions("", []string{"configmaps"}, read, "")...) // the CA certificates of BackendTLSPolicies
		add(Permissions("gateway.envoyproxy.io", []string{"backendtrafficpolicies", "securitypolicies", "clienttrafficpolicies"}, read, "")...)
		add(Permissions("gateway.envoyproxy.io", []string{"backendtrafficpolicies/status", "securitypolicies/status", "clienttrafficpolicies/status"}, status, "")...)
		add(Permissions("gateway.networking.k8s.io", []string{"gatewayclasses"}, []string{"create"}, "")...)
		add(Permissions("", []string{"namespaces"}, read, "")...)
	}
	if f.SecretSync || f.Ingress || f.GatewayAPI {
		// TLS Secrets of served Ingresses and Gateways (and labelled ones) are mirrored as
		// SyncSecrets; patch sets and removes the cleanup finalizer.
		add(Permissions("", []string{"secrets"}, append(slices.Clone(read), "patch"), "")...)
	}
	if f.HubKubeconfigSecret != "" {
		for _, v := range []string{"get", "update"} {
			add(Permission{Resource: "secrets", Verb: v, Namespace: namespace, Name: f.HubKubeconfigSecret})
		}
	}
	if f.GatewayAPI && f.InstallGatewayCRDs {
		add(Permissions("apiextensions.k8s.io", []string{"customresourcedefinitions"}, []string{"get", "list", "watch", "create", "update", "patch"}, "")...)
	}
	return ps
}

// CCMForbidden is what the ccm must not be able to do in the tenant cluster with the given
// features (creating and deleting Services and EndpointSlices only with Ingresses or Gateway
// API: the twins and their slices).
func CCMForbidden(f CCMFeatures) []Permission {
	var ps []Permission
	add := func(p ...Permission) { ps = append(ps, p...) }
	if !f.Ingress && !f.GatewayAPI {
		add(Permissions("", []string{"services"}, []string{"create", "delete"}, "")...)
		add(Permissions("discovery.k8s.io", []string{"endpointslices"}, []string{"create", "delete"}, "")...)
	}
	add(Permissions("", []string{"secrets"}, []string{"create", "update", "delete"}, "")...)
	add(Permissions("", []string{"nodes"}, []string{"create", "update", "patch", "delete"}, "")...)
	add(Permissions("", []string{"pods", "configmaps", "namespaces"}, []string{"create", "delete"}, "")...)
	add(Permissions("apps", []string{"deployments", "daemonsets"}, []string{"create", "update"}, "")...)
	add(Permissions("apiextensions.k8s.io", []string{"customresourcedefinitions"}, []string{"delete"}, "")...)
	add(Permissions("rbac.authorization.k8s.io", []string{"clusterroles", "clusterrolebindings", "roles", "rolebindings"}, []string{"create", "escalate", "bind"}, "")...)
	add(Permissions("", []string{"users", "groups", "serviceaccounts"}, []string{"impersonate"}, "")...)
	add(Permissions("coordination.k8s.io", []string{"leases"}, []string{"create", "update"}, "kube-system")...)
	add(Permissions("kubelb.k8c.io", []string{"loadbalancers", "tenants"}, []string{"create", "list"}, "")...)
	return ps
}

// Address providers (--address-provider), as the charts name them.
const (
	ProviderNodeIP = "node-ip"
	ProviderIPAM   = "ipam"
)

// addressProvider is what an address provider does in the cluster whose Services it gives
// addresses (the hub's for the manager, the cluster itself for the standalone ccm): it reads
// the Services and writes their status (status.loadBalancer and the AddressAssigned
// condition), records Warning Events on pending ones; node-ip reads the nodes, and with NAT
// creates, updates and deletes the shadow ClusterIP Services; ipam reads the AddressPools
// (cluster-scoped) and keeps the allocations in their status.
func addressProvider(provider string, nat bool) []Permission {
	var ps []Permission
	add := func(p ...Permission) { ps = append(ps, p...) }
	add(Permissions("", []string{"services"}, read, "")...)
	add(Permissions("", []string{"services/status"}, []string{"get", "patch"}, "")...)
	add(Permissions("events.k8s.io", []string{"events"}, []string{"create", "patch"}, "")...)
	switch provider {
	case ProviderNodeIP:
		add(Permissions("", []string{"nodes"}, read, "")...)
		if nat {
			add(Permissions("", []string{"services"}, []string{"create", "update", "patch", "delete"}, "")...)
		}
	case ProviderIPAM:
		add(Permissions("kubelb.k8c.io", []string{"addresspools"}, read, "")...)
		add(Permissions("kubelb.k8c.io", []string{"addresspools/status"}, status, "")...)
	}
	return ps
}

// ManagerAddressProviderPermissions is what the manager chart adds for addressProvider.type
// provider (none: nothing) with nodeIPNAT nat, in its ClusterRole <fullname>-address-provider.
func ManagerAddressProviderPermissions(provider string, nat bool) []Permission {
	if provider == "" || provider == "none" {
		return nil
	}
	return addressProvider(provider, nat)
}

// CCMStandalonePermissions is all the standalone ccm (mode: standalone) holds with
// standalone.addressProvider provider and standalone.nodeIPNAT nat: the provider's
// permissions (nodes are read with either provider), the lease and the core Events
// controller-runtime's leader election records, in its namespace.
func CCMStandalonePermissions(namespace, provider string, nat bool) []Permission {
	ps := addressProvider(provider, nat)
	ps = append(ps, Permissions("", []string{"nodes"}, read, "")...)
	ps = append(ps, Permissions("coordination.k8s.io", []string{"leases"}, crud, namespace)...)
	ps = append(ps, Permissions("", []string{"events"}, []string{"create", "patch"}, namespace)...)
	return dedupe(ps)
}

// CCMStandaloneForbidden is what the standalone ccm must not be able to do: none of the hub
// mode's extras (Secrets, Ingresses, Gateway API, EndpointSlices, Service finalizers and
// updates), Services created or deleted only for NAT shadows, AddressPools only with ipam.
func CCMStandaloneForbidden(namespace, provider string, nat bool) []Permission {
	var ps []Permission
	add := func(p ...Permission) { ps = append(ps, p...) }
	add(Permissions("", []string{"secrets"}, []string{"get", "list", "watch", "create", "update", "patch", "delete"}, "")...)
	add(Permissions("", []string{"secrets"}, []string{"get", "update"}, namespace)...)
	add(Permissions("", []string{"services/finalizers"}, []string{"update"}, "")...)
	add(Permissions("", []string{"services/status"}, []string{"update"}, "")...)
	add(Permissions("", []string{"nodes"}, []string{"create", "update", "patch", "delete"}, "")...)
	add(Permissions("", []string{"namespaces", "pods", "configmaps", "endpoints"}, []string{"get", "list", "create", "delete"}, "")...)
	add(Permissions("", []string{"events"}, []string{"create", "patch"}, "default")...)
	add(Permissions("events.k8s.io", []string{"events"}, []string{"update", "delete"}, "")...)
	add(Permissions("discovery.k8s.io", []string{"endpointslices"}, []string{"get", "list", "create", "delete"}, "")...)
	add(Permissions("networking.k8s.io", []string{"ingresses", "ingressclasses"}, []string{"get", "list"}, "")...)
	add(Permissions("gateway.networking.k8s.io", []string{"gateways", "httproutes", "gatewayclasses"}, []string{"get", "list", "create"}, "")...)
	add(Permissions("apiextensions.k8s.io", []string{"customresourcedefinitions"}, []string{"get", "create", "update", "delete"}, "")...)
	add(Permissions("kubelb.k8c.io", []string{"loadbalancers", "tenants", "addresspools"}, []string{"create", "update", "delete"}, "")...)
	add(Permissions("rbac.authorization.k8s.io", []string{"clusterroles", "clusterrolebindings", "roles", "rolebindings"}, []string{"create", "escalate", "bind"}, "")...)
	add(Permissions("", []string{"users", "groups", "serviceaccounts"}, []string{"impersonate"}, "")...)
	add(Permissions("coordination.k8s.io", []string{"leases"}, []string{"create", "update"}, "kube-system")...)
	if !nat {
		add(Permissions("", []string{"services"}, []string{"create", "update", "patch", "delete"}, "")...)
	}
	if provider != ProviderIPAM {
		add(Permissions("kubelb.k8c.io", []string{"addresspools", "addresspools/status"}, []string{"get", "list", "update", "patch"}, "")...)
	}
	return ps
}

// dedupe returns ps without repetitions, in order.
func dedupe(ps []Permission) []Permission {
	seen := map[Permission]bool{}
	var out []Permission
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}
