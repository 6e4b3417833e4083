// Package conditiondoc holds the one table of the condition types and reasons the manager
// writes on kubelb's objects, with what each means. It renders the reference
// docs/conditions.md (`go test ./internal/conditiondoc -update`, run by make generate), and
// its test checks that the CRD schemas describe every type and reason of the table, so that
// `kubectl explain` tells what they mean. A new condition type or reason goes into Kinds.
package conditiondoc

import (
	"fmt"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/loadbalancer"
	"kubelb.dev/kubelb/internal/manager/route"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/manager/syncsecret"
	"kubelb.dev/kubelb/internal/manager/tenant"
	"kubelb.dev/kubelb/internal/reach"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds/translator"
)

// Reason is one reason of a condition and what it means.
type Reason struct {
	Name    string
	Status  string // "True", "False" or "" for either
	Meaning string
}

// Condition is one condition type of a kind.
type Condition struct {
	Type    string
	Meaning string
	Reasons []Reason
	// Problems: a False condition may also take the reason of a translation problem
	// (TranslationProblems).
	Problems bool
}

// Kind is a kubelb kind and the conditions the manager writes on it.
type Kind struct {
	Kind   string
	Plural string
	// Field is the path of the conditions list in the object, e.g. status.conditions.
	Field      string
	Conditions []Condition
}

// Kinds lists every condition the manager writes on kubelb's objects, by kind.
var Kinds = []Kind{
	{Kind: "LoadBalancer", Plural: "loadbalancers", Field: "status.conditions", Conditions: []Condition{
		{Type: loadbalancer.ConditionReady, Meaning: "whether the hub Service exposes every port with an address", Reasons: []Reason{
			{loadbalancer.ReasonAddressAssigned, "True", "every port has a listener port and the hub Service an address"},
			{loadbalancer.ReasonNoExternalAddress, "True", "spec.type is ClusterIP or NodePort: the hub Service gets no external address, as asked"},
			{loadbalancer.ReasonWaitingForAddress, "False", "the hub Service has no address yet: nothing on the hub serves its load-balancer class (an AddressPool, a cloud, MetalLB)"},
			{loadbalancer.ReasonUnsupportedType, "False", "spec.type is not ClusterIP, NodePort or LoadBalancer"},
			{loadbalancer.ReasonNodePortsNotAllowed, "False", "spec.type NodePort while the tenant may not take hub NodePorts"},
			{loadbalancer.ReasonPortsExhausted, "False", "no listener port is left in the manager's port range"},
			{loadbalancer.ReasonLoadBalancingDisabled, "False", "the Tenant or Config disables load balancing; the hub Service is removed"},
			{loadbalancer.ReasonNoPorts, "False", "the LoadBalancer asks for no ports"},
			{loadbalancer.ReasonInvalidPorts, "False", "some ports repeat another one and were left out"},
			{loadbalancer.ReasonServiceFailed, "False", "the hub's API server rejected the hub Service"},
			{loadbalancer.ReasonIPFamilyUnavailable, "False", "the hub cannot give the IP families asked for"},
			{loadbalancer.ReasonQuotaExceeded, "False", "the tenant's limits refuse the LoadBalancer"},
		}},
		{Type: loadbalancer.ConditionHostname, Meaning: "whether the LoadBalancer's hostname is assigned (absent without a hostname)", Reasons: []Reason{
			{loadbalancer.ReasonHostnameAssigned, "True", "the hostname is in status.hostname"},
			{loadbalancer.ReasonHostnameInvalid, "False", "the hostname is not a usable DNS name, or explicit hostnames are not allowed"},
			{loadbalancer.ReasonHostnameConflict, "False", "an older LoadBalancer (of this or another tenant) holds the hostname"},
			{loadbalancer.ReasonCertificateFailed, "False", "the cert-manager Certificate could not be made"},
			{loadbalancer.ReasonHostnameNotServed, "False", "the tenant's Ingress Service, which serves the hostname, cannot be made (no listener port left, or a Service of its name in the way)"},
		}},
		programmed,
		{Type: status.ConditionBackendsReachable, Meaning: reachableMeaning + " (written by the leader; the ccm copies it onto the Service as kubelb.k8c.io/BackendsReachable)",
			Reasons: backendsReachable.Reasons},
	}},
	{Kind: "Route", Plural: "routes", Field: "status.resources.route.conditions", Conditions: []Condition{
		{Type: route.ConditionApplied, Meaning: "whether the hub objects of the Route (its hub Service, listener ports) are in place", Reasons: []Reason{
			{route.ReasonApplied, "True", "the hub objects the Route needs are applied"},
			{route.ReasonDisabled, "False", "the Tenant or Config disables Ingress or Gateway API"},
			{route.ReasonPortsExhausted, "False", "no listener port is left in the manager's port range"},
			{route.ReasonInvalidListeners, "False", "some Gateway listeners were left out (the others are served)"},
			{route.ReasonUnsupportedKind, "False", "the embedded object is not a kind kubelb serves"},
			{route.ReasonServiceFailed, "False", "the hub Service was rejected, or a Service of its name is in the way"},
			{route.ReasonInvalidName, "False", "the Route's name cannot label its hub Service"},
			{route.ReasonQuotaExceeded, "False", "the tenant's limits refuse the Route"},
		}},
		{Type: status.ConditionProgrammed, Meaning: programmed.Meaning, Problems: true,
			Reasons: append(append([]Reason{}, programmed.Reasons...),
				Reason{status.ReasonNotTranslated, "False", "no front end said anything of the Route: kubelb does not translate its kind"})},
		backendsReachable,
	}},
	{Kind: "Tenant", Plural: "tenants", Field: "status.conditions", Conditions: []Condition{
		{Type: tenant.ConditionReady, Meaning: "whether the tenant is onboarded: namespace, RBAC, the ccm's kubeconfig Secret and TenantState in place", Reasons: tenantReasons},
		{Type: tenant.ConditionLimitsNearlyReached, Meaning: "whether the tenant's LoadBalancers and Routes take 80% or more of one of its limits (spec.limits: loadBalancers, routes, listenerPorts, nodePorts, objectBytes); the message names each with its numbers, and a Warning Event goes with each move to True or between its True reasons", Reasons: []Reason{
			{tenant.ReasonNearLimit, "True", "80% or more of a limit is taken; nothing is refused yet"},
			{tenant.ReasonLimitReached, "True", "the objects ask for more than a limit allows: the newest are refused (QuotaExceeded)"},
			{tenant.ReasonWithinLimits, "False", "less than 80% of every limit is taken"},
		}},
	}},
	{Kind: "TenantState", Plural: "tenantstates", Field: "status.conditions", Conditions: []Condition{
		{Type: tenant.TenantStateReady, Meaning: "whether the hub serves the tenant; the reason is the Tenant's Ready reason", Reasons: tenantReasons},
	}},
	{Kind: "SyncSecret", Plural: "syncsecrets", Field: "status.conditions", Conditions: []Condition{
		{Type: syncsecret.ConditionSynced, Meaning: "whether the hub Secret is made from the SyncSecret", Reasons: []Reason{
			{syncsecret.ReasonSynced, "True", "the hub Secret matches the SyncSecret"},
			{syncsecret.ReasonInvalid, "False", "the SyncSecret cannot become a Secret (labels, keys, size, TLS keys)"},
			{syncsecret.ReasonSecretConflict, "False", "a Secret of the hub Secret's name exists and was not made for this SyncSecret"},
			{syncsecret.ReasonSecretRejected, "False", "the hub's API server refused the Secret"},
		}},
	}},
	{Kind: "AddressPool", Plural: "addresspools", Field: "status.conditions", Conditions: []Condition{
		{Type: v1alpha1.AddressPoolConditionReady, Meaning: "whether every entry of spec.addresses is valid", Reasons: []Reason{
			{v1alpha1.AddressPoolReasonValid, "True", "every entry is valid"},
			{v1alpha1.AddressPoolReasonInvalidAddresses, "False", "some entries cannot be read; the message names them (the others are handed out)"},
		}},
		{Type: v1alpha1.AddressPoolConditionDefault, Meaning: "on a pool with spec.default: whether it is the default pool", Reasons: []Reason{
			{v1alpha1.AddressPoolReasonDefault, "True", "the pool is the default pool"},
			{v1alpha1.AddressPoolReasonNotDefault, "False", "an older pool with spec.default wins"},
		}},
	}},
}

// programmed is the Programmed condition of LoadBalancers (and, with one more reason, Routes).
var programmed = Condition{Type: status.ConditionProgrammed,
	Meaning:  "whether the tenant's Envoy proxies hold the object's configuration (written by the leader)",
	Problems: true,
	Reasons: []Reason{
		{status.ReasonProgrammed, "True", "every port is in a configuration no proxy rejected"},
		{status.ReasonProgrammedWithWarnings, "True", "served, but some input was refused or ignored; the message names it"},
		{status.ReasonRejected, "False", "an Envoy proxy rejected (NACKed) the configuration; the TenantState's status.rejections holds Envoy's message"},
	}}

// reachableMeaning is what BackendsReachable says.
const reachableMeaning = "whether the tenant's Envoy proxies reach the object's endpoints (the tenant's NodePorts) in their health checks"

// backendsReachable is the BackendsReachable condition of Routes (and, with the ccm's copy
// named, LoadBalancers).
var backendsReachable = Condition{Type: status.ConditionBackendsReachable,
	Meaning: reachableMeaning + " (written by the leader)",
	Reasons: []Reason{
		{reach.ReasonReachable, "True", "every endpoint answered the health checks of every proxy"},
		{reach.ReasonSomeUnreachable, "False", "some endpoints did not answer; the message names them (address:port)"},
		{reach.ReasonNoneReachable, "False", "no endpoint answered: a firewall between the hub and the tenant's nodes, or nothing behind the NodePort"},
		{reach.ReasonNotYetChecked, "Unknown", "no proxy has reported on the current endpoints yet, or there are none (a new object has no BackendsReachable condition until the first report)"},
		{reach.ReasonHealthNotReported, "Unknown", fmt.Sprintf("the proxies found unreachable endpoints in more of the tenant's clusters than a manager replica reports (%d, those with unreachable endpoints first), and this object's clusters were left out of the report: fix the objects whose BackendsReachable is False first", reach.MaxReportedClusters)},
		{reach.ReasonTooManyEndpoints, "Unknown", fmt.Sprintf("the tenant's clusters have more endpoints than the proxies health-check (%d; clusters by name, those that fit) and some of this object's are left out: its reachability is not checked; the message gives the counts", reach.MaxCheckedEndpoints)},
	}}

// tenantReasons are the reasons of the Tenant's (and the TenantState's) Ready condition.
var tenantReasons = []Reason{
	{tenant.ReasonProvisioned, "True", "namespace, RBAC, kubeconfig Secret and TenantState are in place"},
	{tenant.ReasonProvisioning, "False", "the manager is creating objects or retrying a failed request"},
	{tenant.ReasonNoHubServerURL, "False", "neither --tenant-kubeconfig-server nor kube-public/cluster-info gives the API server URL for the ccm's kubeconfig"},
	{tenant.ReasonInvalidName, "False", "tenant-<name> is not a valid namespace name"},
	{tenant.ReasonNamespaceConflict, "False", "namespace tenant-<name> belongs to another owner"},
	{tenant.ReasonNamespaceTerminating, "False", "namespace tenant-<name> of a previous Tenant is still being deleted"},
	{tenant.ReasonServiceAccountRevoked, "False", "the ccm's ServiceAccount was deleted and is re-created once its tokens are no longer accepted"},
	{tenant.ReasonTokenRequestFailed, "False", "the hub's API server refused a token for the ccm's ServiceAccount"},
	{tenant.ReasonWaitingForTenantObjects, "False", "the Tenant is being deleted and LoadBalancers, Routes or SyncSecrets still exist"},
	{tenant.ReasonWaitingForNamespace, "False", "the Tenant is being deleted and its namespace still exists"},
	{tenant.ReasonForeignFinalizers, "False", "the Tenant is being deleted and finalizers kubelb does not remove hold its objects"},
}

// TranslationProblems are the reasons of the problems the translation finds; a False
// Programmed condition takes the reason of its first Error problem, and the message lists
// every problem.
var TranslationProblems = []Reason{
	{translate.ReasonInvalidName, "", "the object's name cannot be used in Envoy names"},
	{translate.ReasonUnsupportedProtocol, "", "a port's protocol is neither TCP nor UDP"},
	{translate.ReasonInvalidPort, "", "a port number is out of range or repeated"},
	{translate.ReasonPortNotAllocated, "", "the hub's listener port range had no port left for it"},
	{translate.ReasonListenerPortConflict, "", "another port already uses the listener port"},
	{translate.ReasonAddressesNotFound, "", "the referenced Addresses object does not exist: is the ccm running?"},
	{translate.ReasonInvalidAddress, "", "an endpoint address is neither an IP nor a DNS name"},
	{translate.ReasonEndpointDenied, "", "an endpoint IP is denied by the endpoint policy"},
	{translate.ReasonEndpointPortNotFound, "", "an endpoint group has no port for this port"},
	{translate.ReasonNoEndpoints, "", "no endpoints at all (e.g. no Ready tenant nodes)"},
	{translate.ReasonInvalidAnnotation, "", "an annotation value is not understood (ignored)"},
	{translate.ReasonUnsupportedAnnotation, "", "an Ingress carries ingress-nginx annotations kubelb does not honour (snippets never; the others not yet), named in one Warning (docs/ingress-nginx.md)"},
	{translate.ReasonProxyProtocolUnsupported, "", "PROXY protocol was asked for a UDP port (ignored)"},
	{translate.ReasonUnsupportedPersistence, "", "spec.persistence.type is not understood (ignored); on a Gateway API route, a part of sessionPersistence Envoy cannot keep (ignored; an unusable name, type or timeout turns the rule's session persistence off)"},
	{translate.ReasonQuotaExceeded, "", "the tenant's limits refuse the object, or cut its endpoints"},
	{translate.ReasonInvalidSourceRanges, "", "spec.sourceRanges has an entry that is not a CIDR, or more than 64 entries: nothing of the LoadBalancer is served until it is fixed (fail closed)"},
	{translate.ReasonClientAddressUnknown, "", "the LoadBalancer has source ranges but its hub Service is of type ClusterIP (and the hub's load balancer gives no required PROXY protocol header), or (section of a UDP port) the port has source ranges while the hub's load balancer gives the clients' addresses by PROXY protocol (spec.loadBalancer.proxyProtocol), which Envoy cannot read on UDP, or (section hostname) the tenant's Ingress Service serving its hostname does not have externalTrafficPolicy Local, or a Gateway's SecurityPolicy or rate limit decides by client address but the Gateway's hub Service does not keep the clients' addresses (and its ClientTrafficPolicy does not read them from X-Forwarded-For or a header): Envoy may see an address of the management cluster, not the client's (warning)"},
	{translate.ReasonHealthCheckThrottled, "", "health checks run less often than asked (the tenant's probe budget)"},
	{translate.ReasonHostnameNotResolved, "", "an endpoint hostname has no resolved addresses (left out)"},
	{translate.ReasonLoadBalancingDisabled, "", "the Tenant or Config disables load balancing"},
	{translate.ReasonInvalidHostname, "", "the hostname is not a usable DNS name, or explicit hostnames are not allowed"},
	{translate.ReasonHostnameConflict, "", "an Ingress, or an older LoadBalancer, already serves the host"},
	{translate.ReasonHostnameNoHTTPPort, "", "the LoadBalancer has no TCP port to serve its hostname on"},
	{translate.ReasonInvalidRoute, "", "the embedded tenant object cannot be read"},
	{translate.ReasonBackendNotFound, "", "a backend Service (or its port) is not among the Route's Services"},
	{translate.ReasonBackendNoNodePort, "", "the backend Service port has no NodePort to reach it on"},
	{translate.ReasonCertificateNotFound, "", "no synced Secret for a referenced certificate: is the Secret labelled for sync in the tenant?"},
	{translate.ReasonInvalidCertificate, "", "the Secret holds no usable certificate and key"},
	{translate.ReasonListenerPortNotAllocated, "", "the hub's listener port range had no port left for the listener"},
	{translate.ReasonInvalidHost, "", "an Ingress host is neither a DNS name nor a wildcard"},
	{translate.ReasonInvalidPath, "", "a path is not absolute, or holds characters a path cannot"},
	{translate.ReasonPathConflict, "", "an older Ingress already serves the same host and path"},
	{translate.ReasonCertificateConflict, "", "an older Ingress already serves the host with another certificate"},
	{translate.ReasonUnsupportedBackend, "", "a backend is not a Service"},
	{translate.ReasonInvalidTLS, "", "a TLS entry cannot be served (no secretName and no default certificate; no hosts and nothing served without a host)"},
	{translate.ReasonInvalidListener, "", "a Gateway listener's name, port, hostname or TLS settings cannot be served"},
	{translate.ReasonInvalidRule, "", "a route rule cannot be served (the route's other rules are)"},
	{translate.ReasonUnsupportedFilter, "", "a filter kubelb does not implement"},
	{translate.ReasonTooMany, "", "a list is longer than kubelb serves; the rest is ignored"},
	{translate.ReasonListenerTaken, "", "a TCP or UDP listener forwards to its oldest route; this one gets no traffic there"},
	{translate.ReasonOverPlatformBound, "", "a BackendTrafficPolicy, SecurityPolicy or ClientTrafficPolicy the Route carries asks more than the platform team allows (spec.trafficPolicies of the Tenant or the Config); none of it applies (warning)"},
	{translator.ReasonInvalidConfig, "", "the Envoy resources failed validation: a bug in kubelb, please report it"},
}
