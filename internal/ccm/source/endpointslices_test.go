package source

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testsupport"
)

// endpointSlice is a manual EndpointSlice of Service svc with IPv4 addresses ips on port
// "first-port" 3000.
func endpointSlice(ns, name, svc string, ips ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("first-port"), Port: ptr.To[int32](3000), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

// selectorless is a Service without a selector (headless: clusterIP None) with port
// "first-port" 8080 → 3000.
func selectorless(ns, name string, headless bool) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "first-port", Port: 8080, Protocol: corev1.ProtocolTCP}}},
	}
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return svc
}

func TestDesiredTwinSlices(t *testing.T) {
	original := selectorless("ns", "manual", false)
	original.UID = "orig-uid"
	twin := DesiredTwin(original)
	twin.UID = "twin-uid"
	a := endpointSlice("ns", "manual-a", "manual", "10.0.0.1", "10.0.0.2")
	a.Labels["service.kubernetes.io/headless"] = "" // never copied: kube-proxy would skip the copy
	b := endpointSlice("ns", "manual-b", "manual", "10.0.0.3")
	ours := endpointSlice("ns", "manual-nodeport-x", "manual", "10.0.0.9")
	ours.Labels[discoveryv1.LabelManagedBy] = SliceManagedBy
	other := endpointSlice("ns", "other-a", "other", "10.0.0.8")
	sources := []discoveryv1.EndpointSlice{*b, *ours, *a, *other}

	got, ignored := DesiredTwinSlices(original, twin, sources)
	if ignored != 0 || len(got) != 2 {
		t.Fatalf("%d copies, %d ignored; want 2, 0", len(got), ignored)
	}
	wantLabels := map[string]string{
		discoveryv1.LabelServiceName: "manual-nodeport", discoveryv1.LabelManagedBy: SliceManagedBy,
		v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue, v1alpha1.LabelOriginName: "manual", v1alpha1.LabelOriginNamespace: "ns",
	}
	for i, src := range []*discoveryv1.EndpointSlice{a, b} { // sorted by the source's name
		c := got[i]
		if c.Name != TwinSliceName("manual-nodeport", src.Name) || c.Namespace != "ns" {
			t.Errorf("copy %d named %s/%s", i, c.Namespace, c.Name)
		}
		if d := cmp.Diff(wantLabels, c.Labels); d != "" {
			t.Errorf("copy %d labels (-want +got):\n%s", i, d)
		}
		if want := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "manual-nodeport", UID: "twin-uid"}}; !cmp.Equal(want, c.OwnerReferences) {
			t.Errorf("copy %d owners %+v", i, c.OwnerReferences)
		}
		if c.AddressType != src.AddressType || !cmp.Equal(c.Endpoints, src.Endpoints) || !cmp.Equal(c.Ports, src.Ports) {
			t.Errorf("copy %d: %s %+v %+v, want those of %s", i, c.AddressType, c.Endpoints, c.Ports, src.Name)
		}
	}
	// The copies do not share memory with the sources.
	*got[0].Endpoints[0].Conditions.Ready = false
	if !*a.Endpoints[0].Conditions.Ready {
		t.Error("a copy shares its endpoints with the source")
	}

	// Deterministic, short and valid names whatever the source's name.
	long := strings.Repeat("x", 253)
	n := TwinSliceName(strings.Repeat("a", 54)+TwinSuffix, long)
	if n != TwinSliceName(strings.Repeat("a", 54)+TwinSuffix, long) || len(n) > 80 || len(validation.IsDNS1123Subdomain(n)) != 0 {
		t.Errorf("copy name %q (%d characters)", n, len(n))
	}
	if TwinSliceName("t", "a") == TwinSliceName("t", "b") {
		t.Error("two sources, one copy name")
	}

	// A selector: Kubernetes makes the twin's slices; no copies.
	withSelector := original.DeepCopy()
	withSelector.Spec.Selector = map[string]string{"app": "web"}
	if got, _ := DesiredTwinSlices(withSelector, twin, sources); got != nil {
		t.Errorf("copies for a Service with a selector: %d", len(got))
	}
	if got, _ := DesiredTwinSlices(nil, twin, sources); got != nil {
		t.Error("copies without an original")
	}
	if got, _ := DesiredTwinSlices(original, nil, sources); got != nil {
		t.Error("copies without a twin")
	}
	// An empty selector is no selector.
	empty := original.DeepCopy()
	empty.Spec.Selector = map[string]string{}
	if got, _ := DesiredTwinSlices(empty, twin, sources); len(got) != 2 {
		t.Errorf("empty selector: %d copies, want 2", len(got))
	}

	// At most MaxMirroredSlices, the first by name; the rest counted.
	var many []discoveryv1.EndpointSlice
	for i := range MaxMirroredSlices + 3 {
		many = append(many, *endpointSlice("ns", fmt.Sprintf("manual-%02d", MaxMirroredSlices+2-i), "manual", "10.0.1.1"))
	}
	got, ignored = DesiredTwinSlices(original, twin, many)
	if len(got) != MaxMirroredSlices || ignored != 3 || got[0].Name != TwinSliceName("manual-nodeport", "manual-00") ||
		got[MaxMirroredSlices-1].Name != TwinSliceName("manual-nodeport", fmt.Sprintf("manual-%02d", MaxMirroredSlices-1)) {
		t.Errorf("%d copies, %d ignored", len(got), ignored)
	}
}

// copiesOf lists the EndpointSlices the ccm keeps for a twin.
func (e *env) copiesOf(twin string, ns string) ([]discoveryv1.EndpointSlice, error) {
	list := &discoveryv1.EndpointSliceList{}
	err := e.Tenant.Client.List(e.ctx, list, client.InNamespace(ns), client.MatchingLabels{
		discoveryv1.LabelServiceName: twin, discoveryv1.LabelManagedBy: SliceManagedBy})
	slices.SortFunc(list.Items, func(a, b discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, err
}

// addresses are the addresses of a slice's endpoints, in order.
func addresses(s *discoveryv1.EndpointSlice) []string {
	var out []string
	for _, ep := range s.Endpoints {
		out = append(out, ep.Addresses...)
	}
	return out
}

// waitCopies waits until the twin's copies are exactly one per source (by name) with the
// source's addresses now, and returns them by source name.
func (e *env) waitCopies(t *testing.T, ns, twin string, want map[string][]string) map[string]discoveryv1.EndpointSlice {
	t.Helper()
	out := map[string]discoveryv1.EndpointSlice{}
	testsupport.Eventually(t, timeout, "EndpointSlices of "+twin, func() error {
		clear(out)
		got, err := e.copiesOf(twin, ns)
		if err != nil {
			return err
		}
		if len(got) != len(want) {
			return fmt.Errorf("%d copies, want %d", len(got), len(want))
		}
		for src, addrs := range want {
			i := slices.IndexFunc(got, func(s discoveryv1.EndpointSlice) bool { return s.Name == TwinSliceName(twin, src) })
			if i < 0 {
				return fmt.Errorf("no copy of %s", src)
			}
			if !slices.Equal(addresses(&got[i]), addrs) {
				return fmt.Errorf("copy of %s has %v, want %v", src, addresses(&got[i]), addrs)
			}
			out[src] = got[i]
		}
		return nil
	})
	return out
}

// TestSelectorlessServiceSlices: an HTTPRoute's backends without a selector — a ClusterIP
// Service with two manual EndpointSlices and a headless one — get NodePort twins with copies
// of those slices (same endpoints and ports, the twin's service-name, managed by the ccm,
// owned by the twin, without the headless label); a source slice changing, going and coming
// is followed, and so is a copy someone deletes; a settled Service makes no writes; a Service
// with a selector gets no copies, and copies go when a selectorless Service gets one, or when
// the twin goes.
func TestSelectorlessServiceSlices(t *testing.T) {
	e := newEnv(t)
	const ns = "eps"
	e.namespace(t, ns, nil)
	e.create(t, gateway(ns, "edge", "kubelb"))
	manual := selectorless(ns, "manual", false)
	headless := selectorless(ns, "headless-manual", true)
	selected := clusterIP(ns, "selected", 80)
	for _, s := range []*corev1.Service{manual, headless, selected} {
		e.create(t, s)
	}
	e.create(t, endpointSlice(ns, "manual-a", "manual", "10.0.0.1", "10.0.0.2"))
	e.create(t, endpointSlice(ns, "manual-b", "manual", "10.0.0.3"))
	hl := endpointSlice(ns, "headless-manual-a", "headless-manual", "10.0.1.1")
	hl.Labels["service.kubernetes.io/headless"] = ""
	e.create(t, hl)
	e.create(t, endpointSlice(ns, "selected-a", "selected", "10.0.2.1"))
	hr := httpRoute(ns, "service-types", []gwapiv1.ParentReference{{Name: "edge"}},
		backend("", "manual"), backend("", "headless-manual"), backend("", "selected"))
	e.create(t, hr)

	e.routeOf(t, tenantNS, hr.UID, func(rt *v1alpha1.Route) error {
		if n := len(rt.Spec.Source.Kubernetes.Services); n != 3 {
			return fmt.Errorf("%d Services embedded", n)
		}
		return nil
	})
	twin := e.twinOf(t, manual)
	copies := e.waitCopies(t, ns, "manual-nodeport", map[string][]string{"manual-a": {"10.0.0.1", "10.0.0.2"}, "manual-b": {"10.0.0.3"}})
	a := copies["manual-a"]
	if a.Labels[v1alpha1.LabelOriginName] != "manual" || a.Labels[v1alpha1.LabelManagedBy] != v1alpha1.LabelManagedByValue ||
		len(a.OwnerReferences) != 1 || a.OwnerReferences[0].UID != twin.UID || a.AddressType != discoveryv1.AddressTypeIPv4 ||
		len(a.Ports) != 1 || *a.Ports[0].Name != "first-port" || *a.Ports[0].Port != 3000 {
		t.Fatalf("copy of manual-a: labels %v, owners %+v, %s, ports %+v", a.Labels, a.OwnerReferences, a.AddressType, a.Ports)
	}
	e.twinOf(t, headless)
	hcopy := e.waitCopies(t, ns, "headless-manual-nodeport", map[string][]string{"headless-manual-a": {"10.0.1.1"}})["headless-manual-a"]
	if _, ok := hcopy.Labels["service.kubernetes.io/headless"]; ok {
		t.Errorf("the headless label was copied: kube-proxy would ignore the twin's endpoints")
	}
	e.twinOf(t, selected)

	// A source slice changes: its copy follows.
	src := &discoveryv1.EndpointSlice{}
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "manual-a"}, src); err != nil {
		t.Fatal(err)
	}
	src.Endpoints = src.Endpoints[:1]
	src.Endpoints[0].Addresses = []string{"10.0.0.4"}
	if err := e.Tenant.Client.Update(e.ctx, src); err != nil {
		t.Fatal(err)
	}
	e.waitCopies(t, ns, "manual-nodeport", map[string][]string{"manual-a": {"10.0.0.4"}, "manual-b": {"10.0.0.3"}})

	// One goes: its copy goes.
	if err := e.Tenant.Client.Delete(e.ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manual-b"}}); err != nil {
		t.Fatal(err)
	}
	copies = e.waitCopies(t, ns, "manual-nodeport", map[string][]string{"manual-a": {"10.0.0.4"}})

	// Settled: a change the copies do not depend on brings a reconcile and no write.
	before := sliceReconciles(ns)
	e.getTenant(t, manual)
	manual.Labels = map[string]string{"note": "hello"}
	if err := e.Tenant.Client.Update(e.ctx, manual); err != nil {
		t.Fatal(err)
	}
	waitSliceReconciles(t, ns, before)
	if now := e.waitCopies(t, ns, "manual-nodeport", map[string][]string{"manual-a": {"10.0.0.4"}}); now["manual-a"].ResourceVersion != copies["manual-a"].ResourceVersion {
		t.Errorf("copy rewritten by a change it does not depend on (resourceVersion %s → %s)", copies["manual-a"].ResourceVersion, now["manual-a"].ResourceVersion)
	}

	// Someone deletes a copy: it comes back.
	if err := e.Tenant.Client.Delete(e.ctx, ptr.To(copies["manual-a"])); err != nil {
		t.Fatal(err)
	}
	e.waitCopies(t, ns, "manual-nodeport", map[string][]string{"manual-a": {"10.0.0.4"}})

	// The Service with a selector has none (Kubernetes makes its twin's slices).
	if got, err := e.copiesOf("selected-nodeport", ns); err != nil || len(got) != 0 {
		t.Errorf("copies for a Service with a selector: %d (err %v)", len(got), err)
	}
	// A selector-less Service gets a selector: its copies go.
	e.getTenant(t, manual)
	manual.Spec.Selector = map[string]string{"app": "web"}
	if err := e.Tenant.Client.Update(e.ctx, manual); err != nil {
		t.Fatal(err)
	}
	e.waitCopies(t, ns, "manual-nodeport", nil)
	e.waitCopies(t, ns, "headless-manual-nodeport", map[string][]string{"headless-manual-a": {"10.0.1.1"}})

	// The route goes: its twins go, and their copies with them (owned by the twin; the ccm
	// deletes them too, so this holds without a garbage collector).
	if err := e.Tenant.Client.Delete(e.ctx, hr); err != nil {
		t.Fatal(err)
	}
	e.waitGone(t, e.Tenant.Client, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "headless-manual-nodeport"}})
	e.waitCopies(t, ns, "headless-manual-nodeport", nil)
}

// TestSelectorlessServiceSliceCap: a Service without a selector with more EndpointSlices than
// MaxMirroredSlices gets that many copies (the first by name) and a Warning Event saying the
// rest are ignored.
func TestSelectorlessServiceSliceCap(t *testing.T) {
	e := newEnv(t)
	const ns = "epscap"
	e.namespace(t, ns, nil)
	svc := selectorless(ns, "many", false)
	e.create(t, svc)
	want := map[string][]string{}
	for i := range MaxMirroredSlices + 2 {
		name := fmt.Sprintf("many-%02d", i)
		e.create(t, endpointSlice(ns, name, "many", fmt.Sprintf("10.0.3.%d", i+1)))
		if i < MaxMirroredSlices {
			want[name] = []string{fmt.Sprintf("10.0.3.%d", i+1)}
		}
	}
	e.create(t, ingress(ns, "many", ptr.To("kubelb"), "many"))
	e.twinOf(t, svc)
	e.waitCopies(t, ns, "many-nodeport", want)
	testsupport.Eventually(t, timeout, ReasonSlicesIgnored+" Event", func() error {
		list := &eventsv1.EventList{}
		if err := e.Tenant.Client.List(e.ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Regarding.UID == svc.UID && ev.Reason == ReasonSlicesIgnored && ev.Type == corev1.EventTypeWarning &&
				strings.Contains(ev.Note, "2 are ignored") {
				return nil
			}
		}
		return errors.New("none yet")
	})
}

// sliceReconciles is the number of finished reconciles of the EndpointSlice controller in ns.
func sliceReconciles(ns string) float64 {
	r := metrics.CCMEndpointSliceReconcile
	return testutil.ToFloat64(r.Total.WithLabelValues(ns, metrics.ResultSuccess)) +
		testutil.ToFloat64(r.Total.WithLabelValues(ns, metrics.ResultError))
}

// waitSliceReconciles waits until the EndpointSlice controller finished more reconciles in ns
// than before.
func waitSliceReconciles(t *testing.T, ns string, before float64) {
	t.Helper()
	testsupport.Eventually(t, timeout, "a reconcile of the EndpointSlices in "+ns, func() error {
		if sliceReconciles(ns) <= before {
			return errors.New("none yet")
		}
		return nil
	})
}
