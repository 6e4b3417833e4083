package v1alpha1_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
)

// TestDefaultAnnotationsKinds: the keys of defaultAnnotations (Config and Tenant) are KubeLB
// CE's kinds. On a real API server every one of them is accepted on both, and a typo such as
// "services" — which would otherwise be silently ignored — is rejected with a message naming
// the accepted kinds.
func TestDefaultAnnotationsKinds(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	kinds := []kubelbv1alpha1.AnnotatedResource{
		kubelbv1alpha1.AnnotatedResourceAll, kubelbv1alpha1.AnnotatedResourceService, kubelbv1alpha1.AnnotatedResourceIngress,
		kubelbv1alpha1.AnnotatedResourceGateway, kubelbv1alpha1.AnnotatedResourceHTTPRoute, kubelbv1alpha1.AnnotatedResourceGRPCRoute,
		kubelbv1alpha1.AnnotatedResourceTCPRoute, kubelbv1alpha1.AnnotatedResourceUDPRoute, kubelbv1alpha1.AnnotatedResourceTLSRoute,
	}
	// The upstream kinds, spelled out: the constants must not drift from KubeLB CE's.
	upstream := []string{"all", "service", "ingress", "gateway", "httproute", "grpcroute", "tcproute", "udproute", "tlsroute"}
	if len(kinds) != len(upstream) {
		t.Fatalf("%d kinds, KubeLB CE has %d", len(kinds), len(upstream))
	}
	for i, k := range kinds {
		if string(k) != upstream[i] {
			t.Errorf("kind %q, KubeLB CE's is %q", k, upstream[i])
		}
	}
	annotations := func(keys ...string) map[kubelbv1alpha1.AnnotatedResource]kubelbv1alpha1.Annotations {
		out := map[kubelbv1alpha1.AnnotatedResource]kubelbv1alpha1.Annotations{}
		for _, k := range keys {
			out[kubelbv1alpha1.AnnotatedResource(k)] = kubelbv1alpha1.Annotations{"example.com/" + k: "yes"}
		}
		return out
	}
	config := func(name string, a map[kubelbv1alpha1.AnnotatedResource]kubelbv1alpha1.Annotations) client.Object {
		return &kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: kubelbv1alpha1.ConfigSpec{AnnotationSettings: kubelbv1alpha1.AnnotationSettings{DefaultAnnotations: a}}}
	}
	tenant := func(name string, a map[kubelbv1alpha1.AnnotatedResource]kubelbv1alpha1.Annotations) client.Object {
		return &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: kubelbv1alpha1.TenantSpec{AnnotationSettings: kubelbv1alpha1.AnnotationSettings{DefaultAnnotations: a}}}
	}
	const message = "defaultAnnotations keys must be one of: all, service, ingress, gateway, httproute, grpcroute, tcproute, udproute, tlsroute"

	for kind, newObject := range map[string]func(string, map[kubelbv1alpha1.AnnotatedResource]kubelbv1alpha1.Annotations) client.Object{
		"Config": config, "Tenant": tenant,
	} {
		t.Run(kind, func(t *testing.T) {
			// Each kind alone, and all of them together.
			for _, k := range upstream {
				if err := c.Create(ctx, newObject("one-"+k, annotations(k)), client.DryRunAll); err != nil {
					t.Errorf("%s with defaultAnnotations.%s: rejected: %v", kind, k, err)
				}
			}
			if err := c.Create(ctx, newObject("every-kind", annotations(upstream...))); err != nil {
				t.Errorf("%s with every kind: rejected: %v", kind, err)
			}
			// Typos and kinds KubeLB CE does not have, alone or among valid kinds.
			for _, keys := range [][]string{{"services"}, {"service", "Service"}, {"gatewayapi"}, {"all", "httproutes"}, {""}} {
				err := c.Create(ctx, newObject("typo", annotations(keys...)), client.DryRunAll)
				if err == nil {
					t.Errorf("%s with defaultAnnotations keys %q: accepted", kind, keys)
					continue
				}
				wantRejected(t, err, message)
			}
		})
	}
}
