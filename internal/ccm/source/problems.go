package source

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/textcut"
)

// The conditions of a hub Route's status.resources.route the ccm carries back: the Route
// controller's (is the hub Service made?), the status writer's (is it in Envoy's
// configuration?) and the reachability writer's (do the tenant's Envoy proxies reach its
// backends?).
const (
	hubConditionApplied         = "ResourceAppliedSuccessfully"
	hubConditionProgrammed      = "Programmed"
	hubConditionReachable       = "BackendsReachable"
	hubReasonProgrammedWarnings = "ProgrammedWithWarnings"
	// hubReasonInvalidListeners: the hub left some of a Gateway's listeners out and serves
	// the others (a False ResourceAppliedSuccessfully that does not stop the Gateway).
	hubReasonInvalidListeners = "InvalidListeners"
	// hubReasonRejected: an Envoy proxy of the tenant's fleet rejected the configuration.
	hubReasonRejected = "Rejected"
)

// ReasonHubProblem is the reason of a hub problem's Warning Event when the hub condition's
// reason is not a usable Event reason.
const ReasonHubProblem = "HubProblem"

// Bounds: an Event note (events.k8s.io allows 1024 bytes), a Gateway condition message.
const (
	maxProblemNote   = 1024
	maxConditionText = 32768
)

// HubProblem is one problem the hub reports on a Route: a condition that is False (the
// object, or part of it, is not served) or a True Programmed with warnings.
type HubProblem struct {
	// Reason and Message are the hub condition's.
	Reason, Message string
	// NotServed: the condition is False.
	NotServed bool
	// Since is the condition's lastTransitionTime.
	Since metav1.Time
}

// RouteProblems are the problems the hub reports on a Route (nil: none, or no Route), in a
// fixed order: ResourceAppliedSuccessfully when False (e.g. Disabled: the Tenant's
// ingress.disable or gatewayAPI.disable), then Programmed when False or True with
// warnings, then BackendsReachable when False (served, but some or all backends do not
// answer the hub's Envoy proxies). A condition written for an older generation of the Route
// is not counted. Pure.
func RouteProblems(r *v1alpha1.Route) []HubProblem {
	if r == nil {
		return nil
	}
	var out []HubProblem
	for _, typ := range []string{hubConditionApplied, hubConditionProgrammed, hubConditionReachable} {
		c := meta.FindStatusCondition(r.Status.Resources.Route.Conditions, typ)
		if c == nil || (c.ObservedGeneration != 0 && c.ObservedGeneration < r.Generation) {
			continue
		}
		switch {
		case c.Status == metav1.ConditionFalse:
			out = append(out, HubProblem{Reason: c.Reason, Message: c.Message, NotServed: notServed(typ, c.Reason), Since: c.LastTransitionTime})
		case typ == hubConditionProgrammed && c.Reason == hubReasonProgrammedWarnings:
			out = append(out, HubProblem{Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime})
		}
	}
	return out
}

// notServed tells whether a False hub condition means that the object is not served at all:
// the hub did not apply it (ResourceAppliedSuccessfully, except InvalidListeners: the other
// listeners are served), or Envoy rejected it (Programmed, Rejected). A False Programmed for
// a translation problem is not: the problem is about a part (a listener, a rule), and the
// translated status the ccm copies already says which. Unreachable backends are not either:
// the configuration is served, the backends do not answer.
func notServed(conditionType, reason string) bool {
	if conditionType == hubConditionReachable {
		return false
	}
	if conditionType == hubConditionApplied {
		return reason != hubReasonInvalidListeners
	}
	return reason == hubReasonRejected
}

// HubJudged tells whether the hub has judged the Route as it is: no condition the ccm reads
// (RouteProblems) was written for an older generation. Right after the ccm changed a
// Route, its conditions are the old spec's until the manager looks at it again; what
// they say is then neither told nor taken back (a problem that stands is not told twice).
func HubJudged(r *v1alpha1.Route) bool {
	for _, typ := range []string{hubConditionApplied, hubConditionProgrammed} {
		c := meta.FindStatusCondition(r.Status.Resources.Route.Conditions, typ)
		if c != nil && c.ObservedGeneration != 0 && c.ObservedGeneration < r.Generation {
			return false
		}
	}
	return true
}

// ProblemNote is the text of the one Warning Event that tells a set of problems (the
// first problem's reason, every message; "" for none). The Event is recorded again only
// when it changes, so a problem that stays makes no new Event.
func ProblemNote(problems []HubProblem) (reason, note string) {
	if len(problems) == 0 {
		return "", ""
	}
	msgs := make([]string, 0, len(problems))
	for _, p := range problems {
		msgs = append(msgs, p.Message)
	}
	note = textcut.Cut("The management cluster reports: "+strings.Join(msgs, "; "), maxProblemNote, textcut.Dots)
	return eventReason(problems[0].Reason), note
}

// eventReason is a hub condition's reason when it is usable as an Event reason (a
// CamelCase word), else ReasonHubProblem.
func eventReason(r string) string {
	if r == "" || len(r) > 128 || !(r[0] >= 'A' && r[0] <= 'Z') {
		return ReasonHubProblem
	}
	for _, c := range r {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return ReasonHubProblem
		}
	}
	return r
}

// WithHubProblems is a Gateway's status (unstructured) with its Programmed condition False
// when the hub reports that the Gateway is not served (the first such problem's reason and
// message): the translation's Programmed only says the configuration was made, not that
// the hub Service exists or that Envoy took it. Without such a problem it is status as
// it is. Pure; status is not changed.
func WithHubProblems(status map[string]any, problems []HubProblem, generation int64) map[string]any {
	var p *HubProblem
	for i := range problems {
		if problems[i].NotServed {
			p = &problems[i]
			break
		}
	}
	out := runtime.DeepCopyJSON(orEmpty(status))
	if p == nil {
		return out
	}
	c := map[string]any{
		"type":               string(gwapiv1.GatewayConditionProgrammed),
		"status":             string(metav1.ConditionFalse),
		"reason":             eventReason(p.Reason),
		"message":            textcut.Cut("The management cluster reports: "+p.Message, maxConditionText, textcut.Dots),
		"observedGeneration": generation,
		"lastTransitionTime": p.Since.UTC().Format(time.RFC3339),
	}
	conds, _ := out["conditions"].([]any)
	next := make([]any, 0, len(conds)+1)
	replaced := false
	for _, cur := range conds {
		if m, _ := cur.(map[string]any); m["type"] == c["type"] {
			next = append(next, c)
			replaced = true
			continue
		}
		next = append(next, cur)
	}
	if !replaced {
		next = append(next, c)
	}
	out["conditions"] = next
	return out
}
