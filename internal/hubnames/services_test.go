package hubnames

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

func TestLoadBalancerServiceName(t *testing.T) {
	t.Parallel()
	// UIDs often start with a digit: the prefix makes them valid Service names.
	if got := LoadBalancerServiceName("0b5f3c1e-8d2a-4e7b-9c1d-2f3a4b5c6d7e"); got != "envoy-0b5f3c1e-8d2a-4e7b-9c1d-2f3a4b5c6d7e" {
		t.Errorf("LoadBalancerServiceName(uid) = %q", got)
	}
	long := LoadBalancerServiceName(strings.Repeat("a", 80))
	if len(validation.IsDNS1035Label(long)) != 0 || long != LoadBalancerServiceName(strings.Repeat("a", 80)) {
		t.Errorf("long name %q is invalid or not deterministic", long)
	}
	if LoadBalancerServiceName("x.y") == LoadBalancerServiceName("x-y") {
		t.Error("distinct invalid names map to the same Service")
	}
}

func TestGatewayServiceName(t *testing.T) {
	t.Parallel()
	if got := GatewayServiceName("be937bc2-3b42-4cc1-896a-a1723ee3e897"); got != "gateway-be937bc2-3b42-4cc1-896a-a1723ee3e897" {
		t.Errorf("UID name → %s", got)
	}
	long := GatewayServiceName(strings.Repeat("a", 60))
	if len(validation.IsDNS1035Label(long)) != 0 || !strings.HasPrefix(long, "gateway-") || len(long) != len("gateway-")+32 {
		t.Errorf("long name → %s", long)
	}
	if GatewayServiceName("Not.Valid") == GatewayServiceName("not.valid") {
		t.Errorf("distinct names hash alike")
	}
}

// service is a Service ns/name with the given labels (key, value, ...) and, when owner is not
// "", a controller reference to the kubelb object kind/owner.
func service(ns, name, kind, owner string, kv ...string) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}}}
	for i := 0; i+1 < len(kv); i += 2 {
		svc.Labels[kv[i]] = kv[i+1]
	}
	if owner != "" {
		svc.OwnerReferences = []metav1.OwnerReference{{APIVersion: kubelbv1alpha1.GroupVersion.String(), Kind: kind, Name: owner, Controller: ptr.To(true)}}
	}
	return svc
}

const managed, managedBy = kubelbv1alpha1.LabelManagedByValue, kubelbv1alpha1.LabelManagedBy

// hashed is a LoadBalancer name too long for a Service name: its hub Service's is hashed.
var hashed = strings.Repeat("a", 80)

// TestLoadBalancerOfAndLooksLikeLoadBalancerService: LoadBalancerOf is the strict check: only
// a Service kubelb's labels prove to be a LoadBalancer's hub Service, under its name, counts.
// LooksLikeLoadBalancerService is the loose check of the LoadBalancer controller's watch: it
// also passes Services kubelb did not make that stand where a hub Service would (a foreign
// Service in the way), which LoadBalancerOf refuses.
func TestLoadBalancerOfAndLooksLikeLoadBalancerService(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		svc     *corev1.Service
		of      string
		looksSo bool
	}{
		{"labelled", service("tenant-a", "envoy-web", "", "", managedBy, managed, kubelbv1alpha1.LabelLoadBalancerNS, "tenant-a", kubelbv1alpha1.LabelLoadBalancerName, "web"), "web", true},
		{"hashed name", service("tenant-a", LoadBalancerServiceName(hashed), "", "", managedBy, managed, kubelbv1alpha1.LabelLoadBalancerNS, "tenant-a", kubelbv1alpha1.LabelLoadBalancerName, hashed), hashed, true},
		{"controller reference", service("tenant-a", "envoy-web", "LoadBalancer", "web", managedBy, managed, kubelbv1alpha1.LabelLoadBalancerNS, "tenant-a"), "web", true},
		{"renamed", service("tenant-a", "envoy-other", "", "", managedBy, managed, kubelbv1alpha1.LabelLoadBalancerNS, "tenant-a", kubelbv1alpha1.LabelLoadBalancerName, "web"), "", true},
		{"unmanaged", service("tenant-a", "envoy-web", "", "", kubelbv1alpha1.LabelLoadBalancerNS, "tenant-a", kubelbv1alpha1.LabelLoadBalancerName, "web"), "", true},
		{"another namespace in its labels", service("tenant-a", "envoy-web", "", "", managedBy, managed, kubelbv1alpha1.LabelLoadBalancerNS, "tenant-b", kubelbv1alpha1.LabelLoadBalancerName, "web"), "", true},
		{"a foreign Service in the way", service("tenant-a", "envoy-web", "", ""), "", true},
		{"controlled by a Route", service("tenant-a", "envoy-web", "Route", "web", managedBy, managed, kubelbv1alpha1.LabelLoadBalancerNS, "tenant-a"), "", true},
		{"labelled only", service("tenant-a", "x", "", "", kubelbv1alpha1.LabelLoadBalancerNS, "tenant-b"), "", true},
		{"another Service", service("tenant-a", "web", "", ""), "", false},
		{"a Gateway's", service("tenant-a", "gateway-r", "", "", managedBy, managed, kubelbv1alpha1.LabelRouteName, "r"), "", false},
	} {
		if got := LoadBalancerOf(tc.svc); got != tc.of {
			t.Errorf("%s: LoadBalancerOf = %q, want %q", tc.name, got, tc.of)
		}
		if got := LooksLikeLoadBalancerService(tc.svc); got != tc.looksSo {
			t.Errorf("%s: LooksLikeLoadBalancerService = %v, want %v", tc.name, got, tc.looksSo)
		}
	}
}

func TestLoadBalancerNamedBy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		svc      *corev1.Service
		ns, want string
	}{
		{"labels", service("tenant-a", "x", "", "", kubelbv1alpha1.LabelLoadBalancerNS, "tenant-b", kubelbv1alpha1.LabelLoadBalancerName, "web"), "tenant-b", "web"},
		{"controller reference", service("tenant-a", "x", "LoadBalancer", "web"), "tenant-a", "web"},
		{"name", service("tenant-a", "envoy-web", "", ""), "tenant-a", "web"},
		// A hashed name maps to its hash, which names no LoadBalancer: the reconcile finds none.
		{"hashed name", service("tenant-a", LoadBalancerServiceName(hashed), "", ""), "tenant-a", strings.TrimPrefix(LoadBalancerServiceName(hashed), "envoy-")},
		{"nothing", service("tenant-a", "web", "", ""), "", ""},
	} {
		if ns, got := LoadBalancerNamedBy(tc.svc); ns != tc.ns || got != tc.want {
			t.Errorf("%s: LoadBalancerNamedBy = %s/%s, want %s/%s", tc.name, ns, got, tc.ns, tc.want)
		}
	}
}

// LoadBalancerMadeFor is the LoadBalancer controller's check before it deletes a Service: a
// LoadBalancer's controller reference, or a KubeLB CE manager's labels in the Service's own
// namespace; never a Route's or the Ingress Service, nor a Service labelled for another
// namespace.
func TestLoadBalancerMadeFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		want string // "" when not a LoadBalancer's
	}{
		{"controller reference", service("tenant-a", "envoy-web", "LoadBalancer", "web"), "web"},
		{"KubeLB CE labels", service("tenant-a", "envoy-web", "", "", kubelbv1alpha1.LabelLoadBalancerNS, "tenant-a", kubelbv1alpha1.LabelLoadBalancerName, "web"), "web"},
		{"labels naming another namespace", service("tenant-a", "envoy-web", "", "", kubelbv1alpha1.LabelLoadBalancerNS, "tenant-b", kubelbv1alpha1.LabelLoadBalancerName, "web"), ""},
		{"a Route's controller", service("tenant-a", "envoy-web", "Route", "web"), ""},
		{"a Gateway's labels", service("tenant-a", "gateway-gw", "LoadBalancer", "web", kubelbv1alpha1.LabelRouteName, "gw"), ""},
		{"the Ingress Service", service("tenant-a", kubelbv1alpha1.IngressServiceName, "", "", kubelbv1alpha1.LabelIngressService, "true"), ""},
		{"nothing", service("tenant-a", "envoy-web", "", ""), ""},
	} {
		lb, _, ok := LoadBalancerMadeFor(tc.svc)
		if got := lb.Name; ok != (tc.want != "") || got != tc.want || (ok && lb.Namespace != "tenant-a") {
			t.Errorf("%s: LoadBalancerMadeFor = %v, %v; want %q", tc.name, lb, ok, tc.want)
		}
	}
}

// TestIsRouteServiceAndLooksLikeRouteService: IsRouteService is the strict check of the
// filters of what a tenant namespace contributes; LooksLikeRouteService the loose check of the
// Route controller's watch, which also passes Services kubelb did not make that carry a Route
// label or stand where a Route's hub Service would.
func TestIsRouteServiceAndLooksLikeRouteService(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		o               client.Object
		proven, looksSo bool
	}{
		{service("t", "a", "", "", managedBy, managed, kubelbv1alpha1.LabelRouteName, "r"), true, true},
		{service("t", "b", "", "", managedBy, managed, kubelbv1alpha1.LabelIngressService, "true"), true, true},
		{service("t", "c", "", "", kubelbv1alpha1.LabelIngressService, "true"), false, true},
		{service("t", "c2", "", "", kubelbv1alpha1.LabelIngressService, "false"), false, true},
		{service("t", "d", "", "", managedBy, managed, kubelbv1alpha1.LabelRouteName, ""), false, false},
		{service("t", kubelbv1alpha1.IngressServiceName, "", ""), false, true},
		{service("t", "gateway-r", "Route", "r"), false, true},
		{service("t", "envoy-web", "", "", managedBy, managed), false, false},
		{service("t", "web", "", ""), false, false},
	} {
		if got := IsRouteService(tc.o); got != tc.proven {
			t.Errorf("IsRouteService(%s) = %v", tc.o.GetName(), got)
		}
		if got := LooksLikeRouteService(tc.o); got != tc.looksSo {
			t.Errorf("LooksLikeRouteService(%s) = %v", tc.o.GetName(), got)
		}
	}
}

func TestRouteNamedByAndIngressService(t *testing.T) {
	t.Parallel()
	if got := RouteNamedBy(service("t", "gateway-x", "Route", "ref", kubelbv1alpha1.LabelRouteName, "label")); got != "label" {
		t.Errorf("RouteNamedBy by label = %q", got)
	}
	if got := RouteNamedBy(service("t", "gateway-x", "Route", "ref")); got != "ref" {
		t.Errorf("RouteNamedBy by controller reference = %q", got)
	}
	if got := RouteNamedBy(service("t", "gateway-x", "LoadBalancer", "ref")); got != "" {
		t.Errorf("RouteNamedBy of a LoadBalancer's = %q", got)
	}
	if !IsIngressService(service("t", kubelbv1alpha1.IngressServiceName, "", "", managedBy, managed, kubelbv1alpha1.LabelIngressService, "true")) ||
		IsIngressService(service("t", kubelbv1alpha1.IngressServiceName, "", "", kubelbv1alpha1.LabelIngressService, "true")) ||
		IsIngressService(service("t", kubelbv1alpha1.IngressServiceName, "", "", managedBy, managed)) {
		t.Error("IsIngressService")
	}
}

func TestIsSyncedSecret(t *testing.T) {
	t.Parallel()
	secret := func(name string, lbls map[string]string, owners ...metav1.OwnerReference) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: name, Labels: lbls, OwnerReferences: owners}}
	}
	withManagedBy := map[string]string{managedBy: managed}
	owner := metav1.OwnerReference{APIVersion: kubelbv1alpha1.GroupVersion.String(), Kind: "SyncSecret", Name: "s", UID: "u", Controller: ptr.To(true)}
	wrongGroup := owner
	wrongGroup.APIVersion = "example.com/v1"
	for _, tc := range []struct {
		o    client.Object
		want bool
	}{
		{secret("a", withManagedBy, owner), true},
		{secret("b", nil, owner), false},
		{secret("c", withManagedBy, wrongGroup), false},
		{secret("d", withManagedBy), false},
	} {
		if got := IsSyncedSecret(tc.o); got != tc.want {
			t.Errorf("IsSyncedSecret(%s) = %v", tc.o.GetName(), got)
		}
	}
}

// TestLoadBalancerServiceOf checks the plan's answer to "is the Service in the place of this
// LoadBalancer's hub Service its own": controlled by it, or adoptable by its labels (made by
// another kubelb manager); an earlier LoadBalancer's of the name is stale; anything else is
// foreign and never touched.
func TestLoadBalancerServiceOf(t *testing.T) {
	t.Parallel()
	lb := &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "web", UID: "u1"}}
	controlled := func(kind, name, uid string) []metav1.OwnerReference {
		yes := true
		return []metav1.OwnerReference{{APIVersion: kubelbv1alpha1.GroupVersion.String(), Kind: kind, Name: name, UID: types.UID(uid), Controller: &yes}}
	}
	labels := map[string]string{kubelbv1alpha1.LabelLoadBalancerName: "web", kubelbv1alpha1.LabelLoadBalancerNS: "tenant-a"}
	for _, tc := range []struct {
		name           string
		svc            *corev1.Service
		ours           bool
		stale, foreign bool
	}{
		{"none", nil, false, false, false},
		{"controlled by it", &corev1.Service{ObjectMeta: metav1.ObjectMeta{OwnerReferences: controlled("LoadBalancer", "web", "u1")}}, true, false, false},
		{"adopted by its labels", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Labels: labels}}, true, false, false},
		{"an earlier LoadBalancer's of its name", &corev1.Service{ObjectMeta: metav1.ObjectMeta{OwnerReferences: controlled("LoadBalancer", "web", "u0")}}, true, true, false},
		{"another LoadBalancer's", &corev1.Service{ObjectMeta: metav1.ObjectMeta{OwnerReferences: controlled("LoadBalancer", "api", "u2")}}, false, false, true},
		{"a Route's, with its labels", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Labels: labels, OwnerReferences: controlled("Route", "web", "u3")}}, false, false, true},
		{"unlabelled, uncontrolled", &corev1.Service{}, false, false, true},
	} {
		got, stale, foreign := LoadBalancerServiceOf(lb, tc.svc)
		if (got != nil) != tc.ours || stale != tc.stale || foreign != tc.foreign {
			t.Errorf("%s: service %v, stale %v, foreign %v; want %v, %v, %v", tc.name, got != nil, stale, foreign, tc.ours, tc.stale, tc.foreign)
		}
	}
	gw := &corev1.Service{ObjectMeta: metav1.ObjectMeta{OwnerReferences: controlled("Route", "gw", "u9")}}
	if !RouteControlled(gw, "gw") || RouteControlled(gw, "other") || RouteControlled(&corev1.Service{}, "gw") {
		t.Error("RouteControlled: want true only for the Route that controls the Service")
	}
}
