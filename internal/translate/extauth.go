package translate

import (
	"fmt"
	"slices"
	"strings"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// External authorization (a SecurityPolicy's extAuth): the authorization service is a tenant
// Service the ccm embeds in the Route carrying the policy (as backends are); the hub makes a
// cluster of it as of any backend (the tenant's nodes × its NodePort, the endpoint policy and
// budget applied) and the listeners serving the policy's routes ask it about each request
// (ir.ExtAuthService, one per policy and Route carrying it: Envoy's ext_authz filter cannot
// change its service per route). The services a tenant's translation serves are bounded
// (maxExtAuthServices); the routes of the others answer 500.

// ReasonExtAuthUnusable: the external authorization of a SecurityPolicy cannot be served (its
// Service is not carried or has no NodePort, or the tenant has too many); its routes answer
// 500 until then.
const ReasonExtAuthUnusable = "ExtAuthUnusable"

// maxExtAuthServices bounds the external authorization services of a tenant's translation,
// so that a listener never runs more than ir.MaxListenerExtAuths ext_authz filters.
const maxExtAuthServices = ir.MaxListenerExtAuths

// extAuthFor is the name of the external authorization service of the routes of SecurityPolicy
// policy ("namespace/name") carried by Route carrier, the service added for the listeners
// (markListeners); "" when it cannot be served, reported on owner.
func (t *l7) extAuthFor(carrier *v1alpha1.Route, policy string, e *trafficpolicy.ExtAuth, owner ir.ObjectRef) string {
	name := carrier.Name + "/" + policy
	svc, _, msg := t.extAuths.get(name,
		func() (*ir.ExtAuthService, string) {
			ns, _, _ := strings.Cut(policy, "/")
			b, _, why := t.backend(carrier, owner, ns, e.Service, e.Port, e.GRPC, "")
			if why != "" {
				return nil, why
			}
			return &ir.ExtAuthService{
				Name: name, Cluster: b.cluster, GRPC: e.GRPC, Path: e.Path, FailOpen: e.FailOpen,
				HeadersToExtAuth: slices.Clone(e.HeadersToExtAuth), HeadersToBackend: slices.Clone(e.HeadersToBackend),
			}, ""
		},
		func() string {
			return fmt.Sprintf("SecurityPolicy %s: the tenant's routes are under more than %d external authorization services (SecurityPolicies with extAuth, counted per object they apply to); its routes answer 500 until fewer are used", truncateMessage(policy), maxExtAuthServices)
		},
		func(why string) string {
			return fmt.Sprintf("SecurityPolicy %s: its extAuth Service cannot be used: %s; its routes answer 500 until then", truncateMessage(policy), why)
		})
	if svc == nil {
		t.problems.Add(owner, ir.SeverityWarning, ReasonExtAuthUnusable, "%s", msg)
		return ""
	}
	return name
}
