// Package status turns what the translation pipeline found into status on the objects a
// tenant wrote: a Programmed condition and Events on each LoadBalancer and Route, and on each
// Route the status of its tenant object (status.resources.route), which the ccm copies back.
//
// It has four parts:
//   - Store (every replica): the envoycp controller publishes each tenant's Report — the
//     objects it translated, the problems found by the front and back ends, and which objects
//     own which Envoy resources at which snapshot version.
//   - Recorder (every replica): the xDS server hands it every NACK of a proxy connected to
//     this replica; it writes them into the tenant's TenantState (status.rejections), each
//     replica under its own field owner, so a NACK received by a standby reaches the leader.
//   - Writer (leader only): per tenant, it joins the Report with the rejections that concern
//     the current snapshot version and sets the Programmed condition of every LoadBalancer
//     whose condition changed, with an Event; and status.resources.route of every Route
//     whose part changed (routes.go): the tenant object's identity, its status as the front
//     ends computed it (StableTransitions keeps unchanged conditions' lastTransitionTime) and
//     Programmed; and BackendsReachable (reachable.go).
//   - Sink (leader only, sink.go): the one writer of LoadBalancer and Route status, for the
//     Writer and the LoadBalancer and Route controllers alike (field owner "kubelb-status").
//
// Programmed (see Programmed) is computed by a pure function of the Report and rejections.
package status

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/textcut"
)

// ConditionProgrammed is the condition type the writer owns.
const ConditionProgrammed = "Programmed"

// Reasons of the Programmed condition; a False condition takes the reason of its first
// problem (translate.Reason*, translator.ReasonInvalidConfig, ReasonRejected).
const (
	// ReasonProgrammed: every port is in a configuration no proxy rejected.
	ReasonProgrammed = "Programmed"
	// ReasonProgrammedWithWarnings: every port is served, but some input was refused or
	// ignored (e.g. one endpoint address); the message names it.
	ReasonProgrammedWithWarnings = "ProgrammedWithWarnings"
	// ReasonRejected: an Envoy proxy rejected the configuration of a port.
	ReasonRejected = "Rejected"
)

// maxMessage bounds a condition message (the API allows 32768; Events 1024).
const maxMessage = 1024

// Programmed computes the Programmed condition of one object from its problems (translation
// and rejections alike): False with the first Error problem's reason when any section is not
// served, True otherwise (ProgrammedWithWarnings when Warning problems remain). The message
// lists every problem, sections first. It also returns the warnings, for Events.
func Programmed(generation int64, problems []ir.Problem) metav1.Condition {
	var errs, warns []string
	reason := ""
	for _, p := range problems {
		if p.Severity == ir.SeverityError {
			if reason == "" {
				reason = p.Reason
			}
			errs = append(errs, p.String())
		} else {
			warns = append(warns, p.String())
		}
	}
	c := metav1.Condition{Type: ConditionProgrammed, ObservedGeneration: generation}
	switch {
	case len(errs) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, reason
		c.Message = bounded("Not served: " + strings.Join(append(errs, warns...), "; "))
	case len(warns) > 0:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonProgrammedWithWarnings
		c.Message = bounded("Served, with warnings: " + strings.Join(warns, "; "))
	default:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonProgrammed
		c.Message = "Every port is in the configuration of the tenant's Envoy proxies."
	}
	return c
}

// bounded cuts a condition message to maxMessage bytes, ending it with a pointer to the
// object's Events (where every problem is) when cut.
func bounded(s string) string {
	return textcut.Cut(s, maxMessage, " … (more in the object's Events)")
}

// rejectionProblems maps the active rejections of one tenant to problems on the objects that
// own the rejected resources. A rejection counts only while its version is the version of
// its type in the current snapshot (older ones were superseded). Envoy's message names the
// rejected resources; when it names none that is known, every owner of that type is
// concerned.
func rejectionProblems(r *Report, rejections []Rejected) []ir.Problem {
	var out []ir.Problem
	for _, rej := range rejections {
		if rej.Version == "" || rej.Version != r.Versions[rej.TypeURL] {
			continue
		}
		owners := r.Owners[rej.TypeURL]
		var names []string
		for _, tok := range strings.FieldsFunc(rej.Message, func(c rune) bool {
			return c == ' ' || c == ',' || c == ':' || c == '\n' || c == '\'' || c == '"' || c == '(' || c == ')'
		}) {
			if _, ok := owners[tok]; ok {
				names = append(names, tok)
			}
		}
		if len(names) == 0 {
			for n := range owners {
				names = append(names, n)
			}
		}
		for _, n := range names {
			for _, o := range owners[n] {
				out = append(out, ir.Problem{Object: o, Severity: ir.SeverityError, Reason: ReasonRejected,
					Message: fmt.Sprintf("Envoy proxy %s rejected the configuration: %s", rej.Proxy, strings.TrimSpace(rej.Message))})
			}
		}
	}
	return out
}
