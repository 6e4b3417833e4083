package hubschema

import (
	"sort"
	"strings"
)

// feature is what a user loses when the hub leaves out one of kubelb's additions to the
// wire contract, and whether an object's value of it asks for anything (a LoadBalancer of a
// single-stack IPv4 Service loses nothing with spec.ipFamilies).
type feature struct {
	what    string
	matters func(obj map[string]any) bool
}

// features are kubelb's additions that its ccm writes (see docs/migration.md), by kind and
// path as Prune reports them.
var features = map[string]map[string]feature{
	"LoadBalancer": {
		"spec.ipFamilies":          {"IPv6 and dual-stack addresses", asksForMoreThanIPv4},
		"spec.ipFamilyPolicy":      {"IPv6 and dual-stack addresses", asksForMoreThanIPv4},
		"spec.healthCheckNodePort": {"health checks of externalTrafficPolicy: Local", always},
		"spec.persistence":         {"source-IP persistence", always},
		// A hub without it (KubeLB CE, an older kubelb) serves every client of the Service.
		"spec.sourceRanges": {"loadBalancerSourceRanges: this hub does NOT restrict the clients of the Service (every address reaches it); restrict them at the hub's own load balancer or upgrade the hub", always},
	},
	"Route": {
		"spec.source.kubernetes.context": {"references across namespaces granted by ReferenceGrants", grantsReferences},
		// An older kubelb's Route CRD has a context without these: the backends a
		// BackendTLSPolicy targets are then left out (requests fail, never unencrypted).
		"spec.source.kubernetes.context.backendTLS":            {backendTLSLost, carriesBackendTLS},
		"spec.source.kubernetes.context.backendCACertificates": {backendTLSLost, carriesBackendTLS},
		// A hub without it (an older kubelb) does not validate client certificates.
		"spec.source.kubernetes.context.frontendCACertificates": {"client certificate validation of Gateways (spec.tls.frontend): this hub does not validate the certificates of clients", carriesFrontendCA},
		// A hub without it (an older kubelb, KubeLB CE) serves the route with its defaults.
		"spec.source.kubernetes.context.backendTraffic": {"BackendTrafficPolicies (Envoy Gateway's): this hub serves the object with its default load balancing, retries, timeouts and no circuit breaker of the policy", carriesContext("backendTraffic")},
		// A hub without it does not restrict clients: said as for loadBalancerSourceRanges.
		"spec.source.kubernetes.context.security": {"SecurityPolicies (Envoy Gateway's authorization by client address): this hub does NOT restrict the clients of the object (every address reaches it); restrict them at the hub's own load balancer or upgrade the hub", carriesContext("security")},
		// A hub without it (an older kubelb, KubeLB CE) serves the Gateway with Envoy's defaults.
		"spec.source.kubernetes.context.clientTraffic": {"ClientTrafficPolicies (Envoy Gateway's): this hub serves the Gateway's listeners with Envoy's default timeouts, header handling and no connection limit, not the policy's", carriesContext("clientTraffic")},
	},
}

const backendTLSLost = "TLS to backends (BackendTLSPolicy): the backends it targets are left out, their requests fail rather than go unencrypted"

// carriesBackendTLS: the Route's context carries BackendTLSPolicies.
func carriesBackendTLS(obj map[string]any) bool {
	spec, _ := obj["spec"].(map[string]any)
	src, _ := spec["source"].(map[string]any)
	k8s, _ := src["kubernetes"].(map[string]any)
	ctx, _ := k8s["context"].(map[string]any)
	entries, _ := ctx["backendTLS"].([]any)
	return len(entries) > 0
}

// carriesContext: the Route's context carries a policy in field (backendTraffic, security).
func carriesContext(field string) func(map[string]any) bool {
	return func(obj map[string]any) bool {
		spec, _ := obj["spec"].(map[string]any)
		src, _ := spec["source"].(map[string]any)
		k8s, _ := src["kubernetes"].(map[string]any)
		ctx, _ := k8s["context"].(map[string]any)
		_, ok := ctx[field].(map[string]any)
		return ok
	}
}

// carriesFrontendCA: the Route's context carries the CA certificates of a Gateway's client
// certificate validation.
func carriesFrontendCA(obj map[string]any) bool {
	spec, _ := obj["spec"].(map[string]any)
	src, _ := spec["source"].(map[string]any)
	k8s, _ := src["kubernetes"].(map[string]any)
	ctx, _ := k8s["context"].(map[string]any)
	entries, _ := ctx["frontendCACertificates"].([]any)
	return len(entries) > 0
}

func always(map[string]any) bool { return true }

// asksForMoreThanIPv4: the object asks for a family policy other than SingleStack, or for
// families other than IPv4 alone.
func asksForMoreThanIPv4(obj map[string]any) bool {
	spec, _ := obj["spec"].(map[string]any)
	if p, _ := spec["ipFamilyPolicy"].(string); p != "" && p != "SingleStack" {
		return true
	}
	fams, _ := spec["ipFamilies"].([]any)
	return len(fams) > 1 || (len(fams) == 1 && fams[0] != "IPv4")
}

// grantsReferences: the Route's context carries ReferenceGrants.
func grantsReferences(obj map[string]any) bool {
	spec, _ := obj["spec"].(map[string]any)
	src, _ := spec["source"].(map[string]any)
	k8s, _ := src["kubernetes"].(map[string]any)
	ctx, _ := k8s["context"].(map[string]any)
	refs, _ := ctx["grantedRefs"].([]any)
	return len(refs) > 0
}

// Unavailable returns, for obj (an object of kind before Prune, as unstructured content),
// the features it asks for that the hub's schema does not carry, given the paths Prune
// removes (Undeclared), in words for a user, sorted and each once. A removed field kubelb
// knows no feature for is named by its path.
func Unavailable(kind string, obj map[string]any, removed []string) []string {
	seen := map[string]bool{}
	for _, p := range removed {
		f, ok := features[kind][p]
		switch {
		case !ok:
			seen["the field "+p] = true
		case f.matters(obj):
			seen[f.what] = true
		}
		// Without a context, backend TLS goes with it.
		if p == "spec.source.kubernetes.context" && carriesBackendTLS(obj) {
			seen[backendTLSLost] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Describe is a sentence for a log or an Event: what the hub leaves out and what is lost.
func Describe(kind string, removed, lost []string) string {
	s := "The management cluster's " + kind + " CRD does not declare " + strings.Join(removed, ", ") +
		" (an older kubelb or KubeLB CE hub): left out of what the ccm writes"
	if len(lost) > 0 {
		s += "; unavailable on this hub: " + strings.Join(lost, ", ")
	}
	return s + "."
}
