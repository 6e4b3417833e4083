package ccm

import (
	"strings"
	"sync"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/textcut"
)

// ReasonProgrammedWithWarnings is the reason of a True Programmed condition whose message
// names input the hub refused or ignored (see internal/manager/status).
const ReasonProgrammedWithWarnings = "ProgrammedWithWarnings"

// ConditionProgrammed is the condition the manager writes on a hub LoadBalancer: True when
// every port is in a configuration Envoy accepted, False (with a reason and a per-port
// message) when a port cannot be served.
const ConditionProgrammed = "Programmed"

// maxHubMessage bounds what the ccm takes of a hub condition's message. Hub status is
// untrusted from the ccm's view, like tenant input.
const maxHubMessage = 1024

// maxReason bounds an Event reason taken from the hub (the events API accepts 128 bytes).
const maxReason = 128

// notePrefix starts every Event note that carries the hub's words.
const notePrefix = "kubelb: "

// programmedCondition returns the LoadBalancer's Programmed condition when it describes the
// current spec (a condition without observedGeneration counts as current), else nil.
func programmedCondition(lb *v1alpha1.LoadBalancer) *metav1.Condition {
	return currentCondition(lb, ConditionProgrammed)
}

// currentCondition returns the LoadBalancer's condition of type typ when it describes the
// current spec (a condition without observedGeneration counts as current), else nil.
func currentCondition(lb *v1alpha1.LoadBalancer, typ string) *metav1.Condition {
	c := meta.FindStatusCondition(lb.Status.Conditions, typ)
	if c == nil || (c.ObservedGeneration != 0 && c.ObservedGeneration < lb.Generation) {
		return nil
	}
	return c
}

// hubConditionsChanged tells whether the Programmed or Ready condition differs between two
// versions of a LoadBalancer in anything the ccm reports.
func hubConditionsChanged(a, b *v1alpha1.LoadBalancer) bool {
	return conditionChanged(a, b, ConditionProgrammed) || conditionChanged(a, b, ConditionReady) || conditionChanged(a, b, hubBackendsReachable)
}

func conditionChanged(a, b *v1alpha1.LoadBalancer, typ string) bool {
	ca := meta.FindStatusCondition(a.Status.Conditions, typ)
	cb := meta.FindStatusCondition(b.Status.Conditions, typ)
	if ca == nil || cb == nil {
		return (ca == nil) != (cb == nil)
	}
	return ca.Status != cb.Status || ca.Reason != cb.Reason || ca.Message != cb.Message ||
		ca.ObservedGeneration != cb.ObservedGeneration
}

// programmedSeen is the last Programmed verdict reported for a Service.
type programmedSeen struct {
	uid     types.UID
	status  metav1.ConditionStatus
	reason  string
	message string
}

// programmedEvents remembers, per Service, the last Programmed verdict the ccm acted on, so
// that a Service gets one Event per change of the hub's verdict (status, reason, message),
// not one per reconcile. Memory only: after a restart the current verdict is reported again
// when it is False.
type programmedEvents struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]programmedSeen
}

func newProgrammedEvents() *programmedEvents {
	return &programmedEvents{seen: map[types.NamespacedName]programmedSeen{}}
}

// programmedEvent is an Event to record on a Service.
type programmedEvent struct {
	eventType, reason, note string
}

// next returns the Event a Service (key, uid) gets for the hub's Programmed condition cond
// (nil: none, or stale), if any, and remembers the verdict. False gives a Warning with the
// condition's reason and message, once per distinct (reason, message); True after False
// gives a Normal "Programmed"; True first, Unknown and nil give nothing.
func (p *programmedEvents) next(key types.NamespacedName, uid types.UID, cond *metav1.Condition) (programmedEvent, bool) {
	if cond == nil || (cond.Status != metav1.ConditionTrue && cond.Status != metav1.ConditionFalse) {
		return programmedEvent{}, false
	}
	cur := programmedSeen{uid: uid, status: cond.Status}
	// False means a port is not served; True with ProgrammedWithWarnings means every port is
	// served but some of the tenant's input was refused (e.g. an endpoint address). Both are
	// told to the app team as Warnings.
	warn := cond.Status == metav1.ConditionFalse || cond.Reason == ReasonProgrammedWithWarnings
	if warn {
		cur.reason = eventReason(cond.Reason, ReasonNotProgrammed)
		cur.message = cleanText(cond.Message, maxHubMessage)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, known := p.seen[key]
	known = known && prev.uid == uid
	p.seen[key] = cur
	switch {
	case known && prev == cur:
		return programmedEvent{}, false
	case warn:
		msg := cur.message
		if msg == "" {
			msg = "the management cluster cannot serve this load balancer (no message given)"
		}
		return programmedEvent{corev1.EventTypeWarning, cur.reason, notePrefix + msg}, true
	case known && (prev.status == metav1.ConditionFalse || prev.reason != ""):
		return programmedEvent{corev1.EventTypeNormal, ReasonProgrammed,
			notePrefix + "the management cluster serves every port of this load balancer again"}, true
	}
	return programmedEvent{}, false
}

// forget drops a Service that is gone or no longer the ccm's.
func (p *programmedEvents) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.seen, key)
}

// eventReason makes an Event or condition reason of a reason written by the hub: letters and
// digits only, starting with a letter (CamelCase, as conditions use), at most maxReason
// bytes; fallback when nothing is left.
func eventReason(s, fallback string) string {
	s = strings.Map(func(r rune) rune {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return r
		}
		return -1
	}, s)
	s = strings.TrimLeft(s, "0123456789")
	if len(s) > maxReason {
		s = s[:maxReason]
	}
	if s == "" {
		return fallback
	}
	return s
}

// cleanText makes untrusted text safe for an Event note or a log line: valid UTF-8, line
// breaks and tabs turned into spaces, other control and format characters (terminal escapes,
// bidirectional overrides, zero-width characters) removed, and at most max bytes, cut on a
// character boundary and ended with "..." when cut.
func cleanText(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			return ' '
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			return -1
		}
		return r
	}, s)
	return textcut.Cut(s, max, textcut.Dots)
}
