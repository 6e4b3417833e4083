package ccm

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
)

func cond(status metav1.ConditionStatus, reason, message string) *metav1.Condition {
	return &metav1.Condition{Type: ConditionProgrammed, Status: status, Reason: reason, Message: message}
}

// TestProgrammedEventsOncePerChange: one Event per change of the hub's verdict, a Normal one
// only on recovery, and a re-created Service (new UID) starts afresh.
func TestProgrammedEventsOncePerChange(t *testing.T) {
	t.Parallel()
	key := types.NamespacedName{Namespace: "shop", Name: "web"}
	p := newProgrammedEvents()
	steps := []struct {
		name string
		uid  types.UID
		cond *metav1.Condition
		want string // "type reason note", "" = no Event
	}{
		{"no condition yet", "u1", nil, ""},
		{"True first: nothing to report", "u1", cond(metav1.ConditionTrue, "Programmed", "ok"), ""},
		{"False", "u1", cond(metav1.ConditionFalse, "NoEndpoints", "TCP/80 (http): NoEndpoints: no Ready node"),
			"Warning NoEndpoints kubelb: TCP/80 (http): NoEndpoints: no Ready node"},
		{"the same again", "u1", cond(metav1.ConditionFalse, "NoEndpoints", "TCP/80 (http): NoEndpoints: no Ready node"), ""},
		{"Unknown changes nothing", "u1", cond(metav1.ConditionUnknown, "Pending", ""), ""},
		{"still the same after Unknown", "u1", cond(metav1.ConditionFalse, "NoEndpoints", "TCP/80 (http): NoEndpoints: no Ready node"), ""},
		{"another message", "u1", cond(metav1.ConditionFalse, "NoEndpoints", "TCP/80 (http): NoEndpoints: no Ready node; UDP/53 (dns): NoEndpoints"),
			"Warning NoEndpoints kubelb: TCP/80 (http): NoEndpoints: no Ready node; UDP/53 (dns): NoEndpoints"},
		{"another reason", "u1", cond(metav1.ConditionFalse, "ListenerPortConflict", "TCP/80 (http): ListenerPortConflict: 10001"),
			"Warning ListenerPortConflict kubelb: TCP/80 (http): ListenerPortConflict: 10001"},
		{"recovered", "u1", cond(metav1.ConditionTrue, "Programmed", "every port"),
			"Normal Programmed kubelb: the management cluster serves every port of this load balancer again"},
		{"True again", "u1", cond(metav1.ConditionTrue, "Programmed", "every port"), ""},
		{"served with a refused address", "u1", cond(metav1.ConditionTrue, "ProgrammedWithWarnings", "InvalidAddress: endpoint address left out"),
			"Warning ProgrammedWithWarnings kubelb: InvalidAddress: endpoint address left out"},
		{"the address fixed", "u1", cond(metav1.ConditionTrue, "Programmed", "every port"),
			"Normal Programmed kubelb: the management cluster serves every port of this load balancer again"},
		{"the first failure again", "u1", cond(metav1.ConditionFalse, "NoEndpoints", "TCP/80 (http): NoEndpoints: no Ready node"),
			"Warning NoEndpoints kubelb: TCP/80 (http): NoEndpoints: no Ready node"},
		{"a new Service of the same name", "u2", cond(metav1.ConditionFalse, "NoEndpoints", "TCP/80 (http): NoEndpoints: no Ready node"),
			"Warning NoEndpoints kubelb: TCP/80 (http): NoEndpoints: no Ready node"},
		{"no reason, no message", "u2", cond(metav1.ConditionFalse, "", ""),
			"Warning NotProgrammed kubelb: the management cluster cannot serve this load balancer (no message given)"},
		// Letters and digits only: "\x1b[31m" leaves "31m".
		{"a reason that is not CamelCase", "u2", cond(metav1.ConditionFalse, "Envoy rejected:\x1b[31m config", "x"),
			"Warning Envoyrejected31mconfig kubelb: x"},
	}
	for _, s := range steps {
		ev, ok := p.next(key, s.uid, s.cond)
		got := ""
		if ok {
			got = ev.eventType + " " + ev.reason + " " + ev.note
		}
		if got != s.want {
			t.Errorf("%s:\n got %q\nwant %q", s.name, got, s.want)
		}
	}
	// A recovery is only news to a Service that was told about the failure.
	p.forget(key)
	if ev, ok := p.next(key, "u2", cond(metav1.ConditionTrue, "Programmed", "")); ok {
		t.Errorf("True after forget: unexpected Event %+v", ev)
	}
}

func TestProgrammedConditionIgnoresStale(t *testing.T) {
	t.Parallel()
	lb := &v1alpha1.LoadBalancer{}
	lb.Generation = 3
	meta.SetStatusCondition(&lb.Status.Conditions, metav1.Condition{Type: ConditionProgrammed, Status: metav1.ConditionFalse,
		Reason: "NoEndpoints", ObservedGeneration: 2})
	if c := programmedCondition(lb); c != nil {
		t.Errorf("a condition about generation 2 of generation 3: %+v, want nil", c)
	}
	lb.Status.Conditions[0].ObservedGeneration = 3
	if c := programmedCondition(lb); c == nil {
		t.Error("a current condition: nil")
	}
	lb.Status.Conditions[0].ObservedGeneration = 0
	if c := programmedCondition(lb); c == nil {
		t.Error("a condition without observedGeneration: nil")
	}
}

func TestCleanText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain":                                 "plain",
		"two\nlines\r\n\tand a tab":             "two lines   and a tab",
		"\x1b[31mred\x1b[0m":                    "[31mred[0m",
		"bidi \u202eevil\u202c zero\u200bwidth": "bidi evil zerowidth",
		"bad utf-8 \xff\xfe end":                "bad utf-8 \uFFFD end",
		"nul\x00 and del\x7f and c1\u0085 gone": "nul and del and c1 gone",
	} {
		if got := cleanText(in, 100); got != want {
			t.Errorf("cleanText(%q) = %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat("é", 2000) // 4000 bytes
	got := cleanText(long, maxHubMessage)
	if len(got) > maxHubMessage || !utf8.ValidString(got) || !strings.HasSuffix(got, "...") {
		t.Errorf("long text: %d bytes, valid UTF-8 %v, suffix %q", len(got), utf8.ValidString(got), got[len(got)-5:])
	}
}

// lbCondition plays the manager: it patches the Programmed condition of a hub LoadBalancer's
// status (and keeps the ingress addresses as they are).
func (e *env) lbCondition(t *testing.T, lb *v1alpha1.LoadBalancer, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	e.lbConditionOf(t, lb, ConditionProgrammed, status, reason, message)
}

// lbConditionOf plays the manager: it patches the condition typ of a hub LoadBalancer's
// status (and keeps the rest as it is).
func (e *env) lbConditionOf(t *testing.T, lb *v1alpha1.LoadBalancer, typ string, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	testsupport.Eventually(t, wait, "patching the "+typ+" condition", func() error {
		cur := &v1alpha1.LoadBalancer{}
		if err := e.Hub.Client.Get(e.ctx, client.ObjectKeyFromObject(lb), cur); err != nil {
			return err
		}
		orig := cur.DeepCopy()
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: typ, Status: status,
			Reason: reason, Message: message, ObservedGeneration: cur.Generation})
		return e.Hub.Client.Status().Patch(e.ctx, cur, client.MergeFrom(orig))
	})
}

// notesOf returns the notes of the Events about a Service with a reason.
func (e *env) notesOf(t *testing.T, svc *corev1.Service, reason string) []string {
	t.Helper()
	var notes []string
	for _, ev := range e.events(t, svc, reason) {
		notes = append(notes, ev.Note)
	}
	return notes
}

// TestProgrammedEvents: the hub's Programmed condition reaches the tenant Service as Events —
// a Warning with the hub's reason and a cleaned, bounded message when it is False, not again
// on an unrelated status change, again when the message changes, and a Normal "Programmed"
// on recovery.
func TestProgrammedEvents(t *testing.T) {
	e, svc, lb := newMirroredService(t)
	e.waitEvent(t, svc, corev1.EventTypeNormal, ReasonLoadBalancerCreated)

	// False: the hub's reason and message, prefixed, cleaned of control characters and cut.
	hostile := "TCP/80 (http): NoEndpoints: no Ready node\n\x1b[2J\u202e" + strings.Repeat("x", 3000)
	e.lbCondition(t, lb, metav1.ConditionFalse, "NoEndpoints", hostile)
	ev := e.waitEvent(t, svc, corev1.EventTypeWarning, "NoEndpoints")
	if !strings.HasPrefix(ev.Note, "kubelb: TCP/80 (http): NoEndpoints: no Ready node [2J") || len(ev.Note) > maxNote ||
		strings.IndexFunc(ev.Note, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) >= 0 {
		t.Errorf("note %q (%d bytes)", ev.Note[:min(len(ev.Note), 80)], len(ev.Note))
	}
	if ev.Action != actionStatus || ev.ReportingController != EventSource {
		t.Errorf("action %q, reporting controller %q", ev.Action, ev.ReportingController)
	}

	// An unrelated status change (the address) is copied, and no second Warning is recorded.
	e.setLBStatus(t, lb, "127.0.0.42")
	e.waitServiceIngress(t, svc, "127.0.0.42")
	if n := e.recorded.count("NoEndpoints", svc); n != 1 {
		t.Errorf("NoEndpoints recorded %d times after an unrelated status change, want 1", n)
	}

	// Another message is news.
	e.lbCondition(t, lb, metav1.ConditionFalse, "NoEndpoints", "TCP/80 (http): NoEndpoints: no Ready node; UDP/53 (dns): NoEndpoints")
	testsupport.Eventually(t, wait, "a second NoEndpoints Event", func() error {
		for _, note := range e.notesOf(t, svc, "NoEndpoints") {
			if strings.HasSuffix(note, "UDP/53 (dns): NoEndpoints") {
				return nil
			}
		}
		return errors.New("not yet")
	})

	// Recovery: one Normal Event, and none for a later unrelated change.
	e.lbCondition(t, lb, metav1.ConditionTrue, "Programmed", "every port is programmed")
	e.waitEvent(t, svc, corev1.EventTypeNormal, ReasonProgrammed)
	e.setLBStatus(t, lb, "127.0.0.43")
	e.waitServiceIngress(t, svc, "127.0.0.43")
	counts := fmt.Sprintf("NoEndpoints %d, Programmed %d", e.recorded.count("NoEndpoints", svc), e.recorded.count(ReasonProgrammed, svc))
	if counts != "NoEndpoints 2, Programmed 1" {
		t.Errorf("Events recorded: %s, want NoEndpoints 2, Programmed 1", counts)
	}
}
