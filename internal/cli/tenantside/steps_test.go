package tenantside

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestStepsFromConditions: each hub condition becomes the right step, with the hint of its
// reason; a Rejected Programmed points at the rejections.
func TestStepsFromConditions(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: typ, Status: status, Reason: reason, Message: "m"}}
	}
	for _, c := range []struct {
		name  string
		step  Step
		state State
		hint  string
	}{
		{"ready", readyStep(cond("Ready", metav1.ConditionTrue, "AddressAssigned")), OK, ""},
		{"no ready yet", readyStep(nil), Failed, "not judged it yet"},
		{"quota", readyStep(cond("Ready", metav1.ConditionFalse, "QuotaExceeded")), Failed, "raise spec.limits"},
		{"waiting", readyStep(cond("Ready", metav1.ConditionFalse, "WaitingForAddress")), Failed, "names no load-balancer class"},
		{"programmed", programmedStep(cond("Programmed", metav1.ConditionTrue, "Programmed")), OK, ""},
		{"rejected", programmedStep(cond("Programmed", metav1.ConditionFalse, "Rejected")), Failed, "rejected the configuration"},
		{"quota programmed", programmedStep(cond("Programmed", metav1.ConditionFalse, "QuotaExceeded")), Failed, "raise spec.limits"},
		{"translation problem", programmedStep(cond("Programmed", metav1.ConditionFalse, "InvalidRule")), Failed, "fix what the message names"},
		{"applied", appliedStep(cond(condApplied, metav1.ConditionFalse, "Disabled")), Failed, "disabled this for your tenant"},
		{"reachable", reachableStep(&cond(condReachable, metav1.ConditionTrue, "Reachable")[0], "h"), OK, ""},
		{"unreachable", reachableStep(&cond(condReachable, metav1.ConditionFalse, "SomeBackendsUnreachable")[0], "check firewalls"), Failed, "check firewalls"},
		{"not yet checked", reachableStep(&cond(condReachable, metav1.ConditionUnknown, "NotYetChecked")[0], "h"), Pending, "m"},
		{"too many endpoints", reachableStep(&cond(condReachable, metav1.ConditionUnknown, "TooManyEndpoints")[0], "h"), Pending, "m"},
	} {
		if c.step.State != c.state || !strings.Contains(c.step.Hint, c.hint) {
			t.Errorf("%s: %+v, want state %d and a hint with %q", c.name, c.step, c.state, c.hint)
		}
	}
}

func TestTokenStepAndPrint(t *testing.T) {
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	h := &Hub{Config: &rest.Config{Host: "https://hub"}, Namespace: "tenant-a", Source: "hub.kubeconfig", Token: expiredJWT()}
	expired := tokenStep(h, time.Now())
	h.Token = ""
	none := tokenStep(h, now)
	if expired.State != Failed || none.State != Skipped {
		t.Fatalf("expired %+v, none %+v", expired, none)
	}
	var out bytes.Buffer
	PrintSteps(&out, []Step{ok("a", "fine"), expired, none})
	PrintConditions(&out, "hub LoadBalancer x", []metav1.Condition{{Type: "Ready", Status: "False", Reason: "R", Message: "two\nlines"}})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"✓ a: fine", "✗ hub token: expired", "    hint: ", "- hub token: ", "hub LoadBalancer x:", "  Ready=False R: two lines"}
	if len(lines) != len(want) {
		t.Fatalf("output:\n%s", out.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], w)
		}
	}
	if FirstFailed([]Step{ok("a", ""), expired}).Name != "hub token" {
		t.Error("FirstFailed")
	}
}

// TestWaitingNamesTheClass: a LoadBalancer waiting for an address names, in its hint, the
// class the manager's message names and who should serve it, or the hub's default.
func TestWaitingNamesTheClass(t *testing.T) {
	waiting := func(msg string) []metav1.Condition {
		return []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: reasonWaitingForAddress, Message: msg}}
	}
	classed := waiting(`Waiting for hub Service tenant-a/x to get an address: it asks for load-balancer class "example.com/lb", and nothing in the hub cluster has given it one yet.`)
	plain := waiting("Waiting for the hub Service to get an address: it names no load-balancer class, so the hub cluster's default implementation should give it one.")
	for _, c := range []struct {
		name string
		step Step
		want []string
	}{
		{"ready, classed", readyStep(classed), []string{`class "example.com/lb"`, "--address-provider-class=example.com/lb", "spec.loadBalancer.class of your Tenant"}},
		{"address, classed", addressStep(nil, &classed[0], "x"), []string{`class "example.com/lb"`}},
		{"ready, no class", readyStep(plain), []string{"names no load-balancer class", "--address-provider=node-ip or ipam"}},
	} {
		if c.step.State != Failed {
			t.Errorf("%s: %+v, want failed", c.name, c.step)
		}
		for _, w := range c.want {
			if !strings.Contains(c.step.Hint, w) {
				t.Errorf("%s: hint %q lacks %q", c.name, c.step.Hint, w)
			}
		}
	}
}

// TestPendingPrintsUnknown: a step the hub has no verdict on prints ? with its hint, is no
// failed step, and is named by Pendings.
func TestPendingPrintsUnknown(t *testing.T) {
	unknown := reachableStep(&metav1.Condition{Type: condReachable, Status: metav1.ConditionUnknown, Reason: "TooManyEndpoints",
		Message: "reachability is not checked: this object's endpoints are left out"}, "h")
	steps := []Step{ok("a", "fine"), unknown}
	var out bytes.Buffer
	PrintSteps(&out, steps)
	want := "✓ a: fine\n? endpoints: BackendsReachable=Unknown TooManyEndpoints\n    hint: reachability is not checked: this object's endpoints are left out\n"
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
	if FirstFailed(steps) != nil || strings.Join(Pendings(steps), ",") != "endpoints" {
		t.Errorf("FirstFailed %v, Pendings %v", FirstFailed(steps), Pendings(steps))
	}
}
