package source

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// slice is an EndpointSlice of Service service as Kubernetes' endpointslice controller writes
// it, with one endpoint (ready or not) on port 80.
func slice(ns, name, service string, ready bool) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: endpointSliceControllerName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(80)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}

func TestTwinReady(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	twinAt := func(age time.Duration) *corev1.Service {
		s := &corev1.Service{}
		if age >= 0 {
			s.CreationTimestamp = metav1.NewTime(now.Add(-age))
		}
		return s
	}
	ready, notReady := []discoveryv1.EndpointSlice{*slice("a", "s", "web", true)}, []discoveryv1.EndpointSlice{*slice("a", "s", "web", false)}
	for _, c := range []struct {
		name                 string
		twin                 *corev1.Service
		original, twinSlices []discoveryv1.EndpointSlice
		want                 bool
	}{
		{"just made, no slice yet", twinAt(-1), ready, nil, false},
		{"young, slice without a ready endpoint", twinAt(time.Second), ready, notReady, false},
		{"young, ready endpoint listed", twinAt(time.Second), ready, ready, true},
		{"original has no ready endpoint: nothing to wait for", twinAt(-1), notReady, nil, true},
		{"original has no slice at all", twinAt(-1), nil, nil, true},
		{"older than TwinWarmup", twinAt(TwinWarmup), ready, nil, true},
		{"unset ready condition counts as ready", twinAt(time.Second), ready, []discoveryv1.EndpointSlice{{Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}}, true},
	} {
		if got := TwinReady(c.twin, c.original, c.twinSlices, now); got != c.want {
			t.Errorf("%s: TwinReady = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRouteWaitsForNewTwinEndpoints: an Ingress whose ClusterIP backend has ready Pods gets
// its hub Route only once the NodePort twin the ccm made for it lists a ready endpoint: until
// Kubernetes' endpointslice controller fills the twin's EndpointSlice, its NodePort refuses
// connections on every node, and a Route sent before would have Envoy fail the first requests
// (and lose the copies of a RequestMirror).
func TestRouteWaitsForNewTwinEndpoints(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "warm", nil)
	svc := clusterIP("warm", "web", 80)
	e.create(t, svc)
	e.create(t, slice("warm", "web-abcde", "web", true)) // the Pods behind the Service are ready
	ing := ingress("warm", "web", ptr.To("kubelb"), "web")
	e.create(t, ing)

	twin := e.twinOf(t, svc)
	// The ccm looks again every twinWarmupPoll; after a few looks there is still no Route.
	for range 3 {
		waitReconciles(t, Ingress, "warm", reconciles(Ingress, "warm"))
	}
	e.noRoute(t, tenantNS, ing.UID)

	// The endpointslice controller lists the Pods for the twin: the Route follows.
	e.create(t, slice("warm", "web-nodeport-fghij", twin.Name, true))
	e.routeOf(t, tenantNS, ing.UID, func(rt *v1alpha1.Route) error {
		if len(rt.Spec.Source.Kubernetes.Services) != 1 || rt.Spec.Source.Kubernetes.Services[0].Name != twin.Name {
			return errors.New("the twin is not embedded yet")
		}
		return nil
	})
}
