package status

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/translate"
)

// TestSettledRouteIsNotWritten: on a real API server, the Writer writes a Route's status once
// and, with the same Report (an hour later), sends no request at all; an Ingress whose
// status is an empty loadBalancer is settled too (the API server keeps the status as
// applied).
func TestSettledRouteIsNotWritten(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	const ns = "tenant-s"
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	report := &Report{Objects: map[ir.ObjectRef]int64{}, Routes: map[string]translate.RouteStatus{}}
	for name, st := range map[string]string{
		"gw":      `{"conditions":[{"type":"Accepted","status":"True","reason":"Accepted","message":"ok","observedGeneration":1,"lastTransitionTime":null}],"listeners":[{"name":"http","attachedRoutes":0,"supportedKinds":[],"conditions":[]}]}`,
		"ingress": `{"loadBalancer":{}}`,
	} {
		r := &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Kind-" + name, "metadata": map[string]any{"name": name, "namespace": "shop"}}}}
		if err := hub.Client.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		report.Objects[ir.ObjectRef{Kind: translate.KindRoute, Namespace: ns, Name: name}] = r.Generation
		report.Routes[name] = translate.RouteStatus{Kind: "Kind-" + name, Generation: 1, Status: json.RawMessage(st)}
	}
	store := NewStore()
	store.Publish(ns, report)

	writes := 0
	c, err := client.NewWithWatch(hub.Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	counted := interceptor.NewClient(c, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			writes++
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		},
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, o runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			writes++
			return c.SubResource(sub).Apply(ctx, o, opts...)
		},
	})
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	w := &Writer{client: counted, store: store, recorder: events.NewFakeRecorder(10), now: func() time.Time { return now }, sink: NewSink(counted)}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: ns}}
	if _, err := w.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if writes != 2 {
		t.Fatalf("%d writes, want 2 (one per Route)", writes)
	}
	r := &v1alpha1.Route{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "ingress"}, r); err != nil {
		t.Fatal(err)
	}
	if string(r.Status.Resources.Route.Status.Raw) != `{"loadBalancer":{}}` {
		t.Errorf("Ingress status stored as %s", r.Status.Resources.Route.Status.Raw)
	}

	now = now.Add(time.Hour)
	if _, err := w.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if writes != 2 {
		t.Errorf("%d more writes for a settled tenant, want none", writes-2)
	}
}

// TestPendingListenerGivesNoVerdict: on a real API server, a Gateway Route whose listener port
// the manager has not allocated yet (Report.Waiting) gets its tenant object's status, but no
// Programmed verdict and no Event; once the Report has the port, Programmed is True, with no
// Warning ever written.
func TestPendingListenerGivesNoVerdict(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	const ns = "tenant-p"
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	r := &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"}}
	r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": map[string]any{"name": "gw", "namespace": "shop"}}}}
	if err := hub.Client.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	ref := ir.ObjectRef{Kind: translate.KindRoute, Namespace: ns, Name: "gw"}
	gwStatus := json.RawMessage(`{"listeners":[{"name":"http","attachedRoutes":0,"supportedKinds":[],"conditions":[]}]}`)
	report := func(waiting bool) *Report {
		rep := &Report{Objects: map[ir.ObjectRef]int64{ref: r.Generation},
			Routes: map[string]translate.RouteStatus{"gw": {Kind: "Gateway", Generation: 1, Status: gwStatus}}}
		if waiting {
			rep.Waiting = map[ir.ObjectRef]bool{ref: true}
		}
		return rep
	}
	store := NewStore()
	recorder := events.NewFakeRecorder(10)
	w := &Writer{client: hub.Client, store: store, recorder: recorder, now: time.Now, sink: NewSink(hub.Client)}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: ns}}

	store.Publish(ns, report(true))
	if _, err := w.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.Route{}
	if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(r), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Resources.Route.Status.Raw) == 0 {
		t.Error("the tenant object's status was not written")
	}
	if c := meta.FindStatusCondition(got.Status.Resources.Route.Conditions, ConditionProgrammed); c != nil {
		t.Errorf("a verdict while a listener port is pending: %+v", c)
	}
	store.Publish(ns, report(false))
	if _, err := w.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(r), got); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Resources.Route.Conditions, ConditionProgrammed); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Programmed after the allocation: %+v", c)
	}
	close(recorder.Events)
	for e := range recorder.Events {
		if strings.HasPrefix(e, corev1.EventTypeWarning) {
			t.Errorf("Warning Event %q", e)
		}
	}
}

// TestRouteStatusWaitsForTheProxies: a Route's status, which the ccm copies to the tenant's
// Gateway API objects where clients wait for Accepted before they send traffic, is written
// only once the tenant's proxies answered the configuration that carries it — or, when they
// do not, after MaxAppliedWait, so a stuck proxy does not hold every status back.
func TestRouteStatusWaitsForTheProxies(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	const ns, name = "tenant-w", "gw"
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	r := &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": map[string]any{"name": name, "namespace": "shop"}}}}
	if err := hub.Client.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	report := func(version, message string) *Report {
		return &Report{
			Objects:  map[ir.ObjectRef]int64{{Kind: translate.KindRoute, Namespace: ns, Name: name}: r.Generation},
			Versions: map[string]string{"routes": version},
			Routes: map[string]translate.RouteStatus{name: {Kind: "Gateway", Generation: 1, Status: json.RawMessage(
				`{"conditions":[{"type":"Accepted","status":"True","reason":"Accepted","message":"` + message + `","observedGeneration":1,"lastTransitionTime":null}]}`)}},
		}
	}
	store := NewStore()
	store.Publish(ns, report("v1", "first"))
	answered := map[string]bool{}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	w := &Writer{client: hub.Client, store: store, recorder: events.NewFakeRecorder(10), now: func() time.Time { return now }, sink: NewSink(hub.Client),
		applied: func(tenant string, versions map[string]string) bool {
			return tenant == ns && answered[versions["routes"]]
		}}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: ns}}
	message := func() string {
		t.Helper()
		got := &v1alpha1.Route{}
		if err := hub.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, got); err != nil {
			t.Fatal(err)
		}
		var st struct{ Conditions []metav1.Condition }
		if err := json.Unmarshal(got.Status.Resources.Route.Status.Raw, &st); err != nil && len(got.Status.Resources.Route.Status.Raw) > 0 {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(st.Conditions, "Accepted"); c != nil {
			return c.Message
		}
		return ""
	}
	reconcileOnce := func() reconcile.Result {
		t.Helper()
		res, err := w.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	if res := reconcileOnce(); res.RequeueAfter != AppliedPoll || message() != "" {
		t.Fatalf("before the proxies answered: requeue %v (want %v), Accepted %q (want none yet)", res.RequeueAfter, AppliedPoll, message())
	}
	answered["v1"] = true
	if reconcileOnce(); message() != "first" {
		t.Fatalf("the proxies answered v1, but Accepted says %q", message())
	}
	// A new configuration the proxies never answer: held back, then written after the wait.
	store.Publish(ns, report("v2", "second"))
	reconcileOnce()
	now = now.Add(MaxAppliedWait / 2)
	if reconcileOnce(); message() != "first" {
		t.Fatalf("v2 is not answered, but Accepted already says %q", message())
	}
	now = now.Add(MaxAppliedWait / 2)
	if res := reconcileOnce(); message() != "second" || res.RequeueAfter == AppliedPoll {
		t.Fatalf("after %v without an answer: Accepted %q (want second), requeue %v", MaxAppliedWait, message(), res.RequeueAfter)
	}
}
