package translate

import (
	"fmt"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/routekind"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// A ClientTrafficPolicy's tls.clientValidation goes the way of a Gateway's own
// spec.tls.frontend (gateway_clientcert.go): its references become a validation of the
// port's HTTPS listeners, resolved against the Route's context.frontendCACertificates (where
// the ccm carries them, ConfigMaps and Secrets of the policy's namespace), and a listener none
// of whose CA certificates can be used is not served (never served without the validation
// asked for). Where the Gateway's spec.tls.frontend validates a port, it wins: the policy's
// validation does not apply there (a Warning says so).

// policyValidation is the client certificate validation a ClientTrafficPolicy asks of one
// port of a Gateway.
type policyValidation struct {
	// validation holds the policy's references as a Gateway's validation would (mode
	// AllowValidOnly; the pointer keys frontendCA's cache).
	validation *gwv1.FrontendTLSValidation
	// optional: a client may go without a certificate (one it presents must verify).
	optional bool
	policy   string // namespace/name
	reported bool   // shadowed by the Gateway's own validation, reported
}

// policyValidation is the validation the ClientTrafficPolicy of Gateway g's port asks for,
// nil for none (no policy, none the hub can use, or one without tls.clientValidation). The
// port's policy is chosen as for its Envoy listener (clientTrafficFor): the first of the
// Gateway's own listeners on the port with a policy of its own the hub can use, else the
// Gateway's.
func (t *l7) policyValidation(g *gateway, port gwv1.PortNumber) *policyValidation {
	if pv, ok := g.policyCAs[port]; ok {
		return pv
	}
	var pv *policyValidation
	if s, ct := t.portClientPolicy(g, port); s != nil && s.TLS != nil && s.TLS.ClientValidation != nil {
		cv := s.TLS.ClientValidation
		v := &gwv1.FrontendTLSValidation{}
		for _, r := range cv.Refs {
			v.CACertificateRefs = append(v.CACertificateRefs, gwv1.ObjectReference{Kind: gwv1.Kind(r.Kind), Name: gwv1.ObjectName(r.Name)})
		}
		pv = &policyValidation{validation: v, optional: cv.Optional, policy: truncate(ct.Namespace) + "/" + truncate(ct.Name)}
	}
	if g.policyCAs == nil {
		g.policyCAs = map[gwv1.PortNumber]*policyValidation{}
	}
	g.policyCAs[port] = pv
	return pv
}

// policyValidationOf is the policy validation whose references v holds (false: v is the
// Gateway's own).
func (g *gateway) policyValidationOf(v *gwv1.FrontendTLSValidation) (*policyValidation, bool) {
	for _, pv := range g.policyCAs {
		if pv != nil && pv.validation == v {
			return pv, true
		}
	}
	return nil, false
}

// portClientPolicy is the checked ClientTrafficPolicy of Gateway g's port and the policy
// itself, nil when none the hub can use applies. Nothing is reported here but what the
// policy's check reports (once per policy).
func (t *l7) portClientPolicy(g *gateway, port gwv1.PortNumber) (*trafficpolicy.ClientSettings, *v1alpha1.ClientTraffic) {
	ctx := sourceContext(g.route)
	if ctx == nil {
		return nil, nil
	}
	specs := g.obj.Spec.Listeners
	if len(specs) > routekind.MaxListeners {
		specs = specs[:routekind.MaxListeners]
	}
	for _, l := range specs {
		name := string(l.Name)
		sec := ctx.PolicySection(name)
		if l.Port != port || name == "" || sec == nil || sec.ClientTraffic == nil {
			continue
		}
		if v, _ := t.client.check(t, sec.ClientTraffic, "the Gateway's listener "+truncate(name)+"'s", t.ref(g.route, "listener "+truncate(name))); v != nil {
			return v, sec.ClientTraffic
		}
	}
	if ctx.ClientTraffic != nil {
		if v, _ := t.client.check(t, ctx.ClientTraffic, "the Gateway's", t.ref(g.route, "")); v != nil {
			return v, ctx.ClientTraffic
		}
	}
	return nil, nil
}

// shadowed reports, once, that the policy's validation does not apply to port: the Gateway's
// own spec.tls.frontend validates it.
func (pv *policyValidation) shadowed(t *l7, g *gateway, port gwv1.PortNumber) {
	if pv.reported {
		return
	}
	pv.reported = true
	t.problems.Add(t.ref(g.route, ""), ir.SeverityWarning, ReasonInvalidClientTraffic,
		"ClientTrafficPolicy %s's tls.clientValidation does not apply to port %d: the Gateway's spec.tls.frontend validates the client certificates there", pv.policy, port)
}

// describe names the policy in a message about its validation ("" for the Gateway's own).
func (pv *policyValidation) describe() string {
	if pv == nil {
		return ""
	}
	return fmt.Sprintf(" (ClientTrafficPolicy %s's tls.clientValidation)", pv.policy)
}
