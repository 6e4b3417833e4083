package envoycp

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/process"
)

// serviceInformers hands out one client-go informer of Services (not started: its store is
// filled by the test), as the owned cache would.
type serviceInformers struct {
	cache.Informers
	inf toolscache.SharedIndexInformer
}

func (s serviceInformers) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return s.inf, nil
}

// TestHubServicesIndexed: a rebuild's hub Services read through the index (OwnedReader) are
// those listing and classifying every Service of the tenant gives — the Services of Routes,
// each LoadBalancer's by its name (label or controller reference) — and nothing of another
// namespace, nor a Service kubelb did not make or that only looks like one. A Service that
// changes what it is moves in the index.
func TestHubServicesIndexed(t *testing.T) {
	const tenant = "tenant-a"
	managed := func(l map[string]string) map[string]string {
		l[v1alpha1.LabelManagedBy] = v1alpha1.LabelManagedByValue
		return l
	}
	svc := func(ns, name string, labels map[string]string, refs ...metav1.OwnerReference) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, OwnerReferences: refs, UID: types.UID(ns + "/" + name)}}
	}
	yes := true
	objs := []*corev1.Service{
		svc(tenant, "kubelb-ingress", managed(map[string]string{v1alpha1.LabelIngressService: "true"})),
		svc(tenant, "gateway-web", managed(map[string]string{v1alpha1.LabelRouteName: "web"})),
		svc(tenant, "envoy-shop", managed(map[string]string{v1alpha1.LabelLoadBalancerNS: tenant, v1alpha1.LabelLoadBalancerName: "shop"})),
		svc(tenant, "envoy-old", managed(map[string]string{v1alpha1.LabelLoadBalancerNS: tenant}),
			metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "LoadBalancer", Name: "old", Controller: &yes}),
		svc(tenant, "envoy-fake", managed(map[string]string{v1alpha1.LabelLoadBalancerNS: "tenant-b", v1alpha1.LabelLoadBalancerName: "fake"})),
		svc(tenant, "envoy-wrong", managed(map[string]string{v1alpha1.LabelLoadBalancerNS: tenant, v1alpha1.LabelLoadBalancerName: "other"})),
		svc(tenant, "gateway-mine", map[string]string{v1alpha1.LabelRouteName: "mine"}),
		svc("tenant-b", "envoy-b", managed(map[string]string{v1alpha1.LabelLoadBalancerNS: "tenant-b", v1alpha1.LabelLoadBalancerName: "b"})),
	}
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.Service{}, 0, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	rt := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		if err := inf.GetStore().Add(o); err != nil {
			t.Fatal(err)
		}
		rt = append(rt, o.DeepCopy())
	}
	ctx := context.Background()
	owned := &OwnedReader{Reader: fake.NewClientBuilder().WithScheme(process.Scheme()).Build(), Informers: serviceInformers{inf: inf}}
	routes, lbs, err := hubServicesOf(ctx, owned, tenant)
	if err != nil {
		t.Fatal(err)
	}
	listed := fake.NewClientBuilder().WithScheme(process.Scheme()).WithRuntimeObjects(rt...).Build()
	wantRoutes, wantLBs, err := hubServicesOf(ctx, listed, tenant)
	if err != nil {
		t.Fatal(err)
	}
	names := func(svcs []*corev1.Service) map[string]bool {
		out := map[string]bool{}
		for _, s := range svcs {
			out[s.Name] = true
		}
		return out
	}
	byLB := func(m map[string]*corev1.Service) map[string]string {
		out := map[string]string{}
		for lb, s := range m {
			out[lb] = s.Name
		}
		return out
	}
	if got, want := names(routes), (map[string]bool{"kubelb-ingress": true, "gateway-web": true}); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, names(wantRoutes)) {
		t.Errorf("Route hub Services %v, want %v (listed: %v)", got, want, names(wantRoutes))
	}
	if got, want := byLB(lbs), (map[string]string{"shop": "envoy-shop", "old": "envoy-old"}); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, byLB(wantLBs)) {
		t.Errorf("LoadBalancer hub Services %v, want %v (listed: %v)", got, want, byLB(wantLBs))
	}
	// The Service of shop stops being kubelb's: it leaves the index.
	changed := objs[2].DeepCopy()
	delete(changed.Labels, v1alpha1.LabelManagedBy)
	if err := inf.GetStore().Update(changed); err != nil {
		t.Fatal(err)
	}
	if _, lbs, err = hubServicesOf(ctx, owned, tenant); err != nil {
		t.Fatal(err)
	}
	if got, want := byLB(lbs), (map[string]string{"old": "envoy-old"}); !reflect.DeepEqual(got, want) {
		t.Errorf("after shop's Service lost its label: %v, want %v", got, want)
	}
}
