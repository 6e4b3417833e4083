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
		{"waiting", readyStep(cond("Ready", metav1.ConditionFalse, "WaitingForAddress")), Failed, "check hub"},
		{"programmed", programmedStep(cond("Programmed", metav1.ConditionTrue, "Programmed"), nil), OK, ""},
		{"rejected", programmedStep(cond("Programmed", metav1.ConditionFalse, "Rejected"), nil), Failed, "rejected the configuration"},
		{"quota programmed", programmedStep(cond("Programmed", metav1.ConditionFalse, "QuotaExceeded"), nil), Failed, "raise spec.limits"},
		{"translation problem", programmedStep(cond("Programmed", metav1.ConditionFalse, "BackendNotFound"), nil), Failed, "fix what the message names"},
		{"applied", appliedStep(cond(condApplied, metav1.ConditionFalse, "Disabled")), Failed, "disabled this for your tenant"},
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
