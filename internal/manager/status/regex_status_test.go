package status_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// TestRefusedRegexBecomesConditionAndEvent: issue 26's attacker HTTPRoute (gw-regex.in.yaml:
// a path regex Envoy's RE2 refuses, beside the victim's HTTPRoute on the same Gateway
// listener), translated and written by the status Writer on a real API server: the attacker's
// Route gets a Programmed condition with warnings and a Warning Event that names the RE2
// program size; the victim's Route is Programmed, with no Warning Event.
func TestRefusedRegexBecomesConditionAndEvent(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	in, err := translatetest.LoadInput("../../translate/testdata/gw-regex.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: in.Tenant,
		Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}}}); err != nil {
		t.Fatal(err)
	}
	objects := map[ir.ObjectRef]int64{}
	for i := range in.Routes {
		r := in.Routes[i].DeepCopy()
		r.ResourceVersion, r.CreationTimestamp, r.Generation = "", metav1.Time{}, 0
		if err := c.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		in.Routes[i].Generation = r.Generation
		objects[ir.ObjectRef{Kind: translate.KindRoute, Namespace: in.Tenant, Name: r.Name}] = r.Generation
	}
	res, err := translate.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	store := status.NewStore()
	testenv.StartManager(t, hub.Config, func(mgr ctrl.Manager) error { return status.SetupWriterWithManager(mgr, store) })
	store.Publish(in.Tenant, &status.Report{
		Objects:  objects,
		Problems: res.Problems,
		Versions: map[string]string{"type.googleapis.com/envoy.config.listener.v3.Listener": "1"},
		Routes:   res.Routes,
	})

	const victim, attacker = "0b1a9c3e-0000-4000-8000-000000000001", "0b1a9c3e-0000-4000-8000-000000000002"
	programmed := func(name string) (*metav1.Condition, error) {
		r := &v1alpha1.Route{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: in.Tenant, Name: name}, r); err != nil {
			return nil, err
		}
		cond := meta.FindStatusCondition(r.Status.Resources.Route.Conditions, status.ConditionProgrammed)
		if cond == nil {
			return nil, fmt.Errorf("Route %s has no Programmed condition yet", name)
		}
		return cond, nil
	}
	testsupport.Eventually(t, timeout, "the attacker's Route to say why its rule is not served", func() error {
		cond, err := programmed(attacker)
		if err != nil {
			return err
		}
		if cond.Reason != status.ReasonProgrammedWithWarnings && cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, "RE2 program size is 124") {
			return fmt.Errorf("Programmed %s/%s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	testsupport.Eventually(t, timeout, "the victim's Route to be Programmed", func() error {
		cond, err := programmed(victim)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue || cond.Reason != status.ReasonProgrammed {
			return fmt.Errorf("Programmed %s/%s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	testsupport.Eventually(t, timeout, "a Warning Event on the attacker's Route naming the program size", func() error {
		evs := &eventsv1.EventList{}
		if err := c.List(ctx, evs, client.InNamespace(in.Tenant)); err != nil {
			return err
		}
		found := false
		for _, e := range evs.Items {
			if e.Type != corev1.EventTypeWarning {
				continue
			}
			if e.Regarding.Name == victim {
				return fmt.Errorf("Warning Event on the victim's Route: %s %s", e.Reason, e.Note)
			}
			if e.Regarding.Name == attacker && strings.Contains(e.Note, "RE2 program size is 124") {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("no such Event among %d", len(evs.Items))
		}
		return nil
	})
}
