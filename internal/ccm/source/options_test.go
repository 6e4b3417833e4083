package source

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/internal/gatewaycrds"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// TestDisableFlags: a second ccm (hub namespace tenant-b) with Ingresses and HTTPRoutes
// switched off mirrors the Gateway but neither the HTTPRoute nor the Ingress, which the first
// ccm (all kinds on) does mirror.
func TestDisableFlags(t *testing.T) {
	e := newEnv(t)
	const hubB = "tenant-b"
	if err := e.Hub.Client.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubB}}); err != nil {
		t.Fatal(err)
	}
	if err := e.startCCM(t, Options{Namespace: hubB, EventSource: "kubelb-ccm-b", Ingress: false, UseIngressClass: true,
		GatewayAPI: true, UseGatewayClass: true, Disabled: map[string]bool{HTTPRoute.Name: true}}); err != nil {
		t.Fatal(err)
	}
	e.namespace(t, "dis", nil)
	e.create(t, clusterIP("dis", "app", 80))
	gw := gateway("dis", "edge", "kubelb")
	hr := httpRoute("dis", "web", []gwapiv1.ParentReference{{Name: "edge"}}, backend("", "app"))
	ing := ingress("dis", "web", ptr.To("kubelb"), "app")
	e.create(t, gw)
	e.create(t, hr)
	e.create(t, ing)
	// The first ccm mirrors all three: the objects were there to be seen.
	for _, o := range []client.Object{gw, hr, ing} {
		e.routeOf(t, tenantNS, o.GetUID(), nil)
	}
	e.routeOf(t, hubB, gw.UID, nil)
	e.noRoute(t, hubB, hr.UID)
	e.noRoute(t, hubB, ing.UID)
}

// TestInstallCRDs: InstallCRDs applies every CRD of a channel and returns once they are
// established (here the experimental channel, onto the hub API server, which nothing in this
// package uses for Gateway API).
func TestInstallCRDs(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	if err := InstallCRDs(ctx, e.Hub.Client, e.Hub.Client, "experimental"); err != nil {
		t.Fatal(err)
	}
	crds, err := gatewaycrds.CRDs("experimental")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range crds {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := e.Hub.Client.Get(e.ctx, client.ObjectKey{Name: want.Name}, got); err != nil {
			t.Fatal(err)
		}
		established := false
		for _, c := range got.Status.Conditions {
			established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
		}
		if !established || got.Annotations["gateway.networking.k8s.io/channel"] != want.Annotations["gateway.networking.k8s.io/channel"] {
			t.Errorf("CRD %s: established %v, channel %q", want.Name, established, got.Annotations["gateway.networking.k8s.io/channel"])
		}
	}
	if err := InstallCRDs(ctx, e.Hub.Client, e.Hub.Client, "nightly"); err == nil {
		t.Error("an unknown channel was accepted")
	}

	// Envoy Gateway's policy CRDs are created when absent (the hub API server serves them as
	// test tenants do: the SecurityPolicy's removed first; nothing on the hub uses it), and one
	// already there (here: the BackendTrafficPolicy's, marked as Envoy Gateway's own install)
	// is left as it is.
	old := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "securitypolicies.gateway.envoyproxy.io"}}
	if err := e.Hub.Client.Delete(e.ctx, old); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	e.waitGone(t, e.Hub.Client, old)
	created, err := InstallPolicyCRDs(ctx, e.Hub.Client, e.Hub.Client)
	if err != nil || !slices.Equal(created, []string{old.Name}) {
		t.Fatalf("installing the policy CRDs on a cluster without the SecurityPolicy's: created %v, %v", created, err)
	}
	btp := &apiextensionsv1.CustomResourceDefinition{}
	objects.Update(t, e.Hub.Client, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "backendtrafficpolicies.gateway.envoyproxy.io"}},
		func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Annotations["example.com/installed-by"] = "envoy-gateway"
			btp = c
		})
	if created, err := InstallPolicyCRDs(ctx, e.Hub.Client, e.Hub.Client); err != nil || len(created) > 0 {
		t.Fatalf("again: created %v, %v", created, err)
	}
	got := &apiextensionsv1.CustomResourceDefinition{}
	if err := e.Hub.Client.Get(e.ctx, client.ObjectKey{Name: btp.Name}, got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations["example.com/installed-by"] != "envoy-gateway" || got.ResourceVersion != btp.ResourceVersion {
		t.Errorf("an existing BackendTrafficPolicy CRD was changed: annotations %v", got.Annotations)
	}
}

// TestMissingGatewayAPICRDs: against a tenant without the Gateway API CRDs, --enable-gateway-api
// skips the Gateway API kinds with a logged warning instead of failing, and Ingresses are still
// mirrored.
func TestMissingGatewayAPICRDs(t *testing.T) {
	e := newEnv(t)
	bare := testenv.Start(t, "bare-tenant", testenv.Options{WithoutKubelbCRDs: true})
	const hubC = "tenant-c"
	if err := e.Hub.Client.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubC}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, prefix+" "+args)
	}, funcr.Options{})
	if err := e.startCCMOn(t, bare.Config, Options{Namespace: hubC, EventSource: "kubelb-ccm-c", Ingress: true, UseIngressClass: true,
		GatewayAPI: true, UseGatewayClass: true}, log); err != nil {
		t.Fatalf("setting up against a tenant without Gateway API: %v", err)
	}
	mu.Lock()
	warned := slices.ContainsFunc(logs, func(l string) bool {
		return strings.Contains(l, "WARNING") && strings.Contains(l, "does not serve Gateway API v1 Gateways")
	})
	mu.Unlock()
	if !warned {
		t.Errorf("no warning about the missing Gateway API in the logs: %v", logs)
	}
	if err := bare.Client.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}); err != nil {
		t.Fatal(err)
	}
	if err := bare.Client.Create(e.ctx, clusterIP("app", "web", 80)); err != nil {
		t.Fatal(err)
	}
	ing := ingress("app", "web", ptr.To("kubelb"), "web")
	if err := bare.Client.Create(e.ctx, ing); err != nil {
		t.Fatal(err)
	}
	e.routeOf(t, hubC, ing.UID, nil)
}
