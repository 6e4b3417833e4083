package ccm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/lbaddress"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// tenantFixture is what a running ccm made of the objects mirrorAll creates.
type tenantFixture struct {
	svc    *corev1.Service
	ing    *networkingv1.Ingress
	hr     *gwapiv1.HTTPRoute
	secret *corev1.Secret
	gone   *corev1.Service
}

// mirrorAll has a running ccm mirror a LoadBalancer Service with the hub's address, an
// Ingress with a TLS Secret and an HTTPRoute on ClusterIP backends (twins), and a Service
// that is then deleted behind the ccm's back (its mirror stays); the ccm is stopped.
func (e *env) mirrorAll(t *testing.T) tenantFixture {
	t.Helper()
	e.namespace(t, "shop")
	stop := e.startCCM(t, ccmOpts{l7: true})
	f := tenantFixture{}

	objects.Create(t, e.Tenant.Client, lbService("shop", "lb"))
	f.svc = e.getService(t, "shop", "lb")
	lb := e.mirrorOf(t, f.svc, nil)
	e.setLBStatus(t, lb, "192.0.2.10")
	e.lbConditionOf(t, lb, ConditionReady, metav1.ConditionTrue, "AddressAssigned", "")
	testsupport.Eventually(t, wait, "the Service's address and AddressAssigned condition", func() error {
		cur := e.getService(t, "shop", "lb")
		if len(cur.Status.LoadBalancer.Ingress) != 1 || meta.FindStatusCondition(cur.Status.Conditions, lbaddress.ConditionAddressAssigned) == nil {
			return fmt.Errorf("status %+v", cur.Status)
		}
		return nil
	})

	objects.Create(t, e.Tenant.Client, lbService("shop", "gone"))
	f.gone = e.getService(t, "shop", "gone")
	e.mirrorOf(t, f.gone, nil)

	for _, name := range []string{"web", "api"} {
		objects.Create(t, e.Tenant.Client, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}})
	}
	f.secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "tls"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"tls.crt": []byte("crt"), "tls.key": []byte("key")}}
	objects.Create(t, e.Tenant.Client, f.secret)
	f.ing = &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: networkingv1.IngressSpec{
		IngressClassName: ptr.To("kubelb"),
		TLS:              []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com"}, SecretName: "tls"}},
		Rules: []networkingv1.IngressRule{{Host: "shop.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}},
	}}
	objects.Create(t, e.Tenant.Client, f.ing)
	objects.Create(t, e.Tenant.Client, &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "edge"}, Spec: gwapiv1.GatewaySpec{
		GatewayClassName: "kubelb", Listeners: []gwapiv1.Listener{{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType}}}})
	f.hr = &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api"}, Spec: gwapiv1.HTTPRouteSpec{
		CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{Name: "edge"}}},
		Rules: []gwapiv1.HTTPRouteRule{{BackendRefs: []gwapiv1.HTTPBackendRef{
			{BackendRef: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{Name: "api", Port: ptr.To(gwapiv1.PortNumber(80))}}}}}}},
	}
	objects.Create(t, e.Tenant.Client, f.hr)

	ingRoute := e.hubRoute(t, f.ing.UID, func(*v1alpha1.Route) error { return nil })
	hrRoute := e.hubRoute(t, f.hr.UID, func(*v1alpha1.Route) error { return nil })
	e.setRouteStatus(t, ingRoute, "web-shop", `{"loadBalancer":{"ingress":[{"ip":"198.51.100.9"}]}}`)
	e.setRouteStatus(t, hrRoute, "api-shop", `{"parents":[{"parentRef":{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"edge"},`+
		`"controllerName":"kubelb.k8c.io/gateway-controller","conditions":[{"type":"Accepted","status":"True","reason":"Accepted","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}]}`)
	testsupport.Eventually(t, wait, "the Ingress's address, the HTTPRoute's parents, twins and the Secret's mirror", func() error {
		ing := &networkingv1.Ingress{}
		hr := &gwapiv1.HTTPRoute{}
		sec := &corev1.Secret{}
		if err := errorsJoin(e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(f.ing), ing),
			e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(f.hr), hr),
			e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(f.secret), sec),
			e.Tenant.Client.Get(e.ctx, client.ObjectKey{Namespace: "shop", Name: "web-nodeport"}, &corev1.Service{}),
			e.Tenant.Client.Get(e.ctx, client.ObjectKey{Namespace: "shop", Name: "api-nodeport"}, &corev1.Service{})); err != nil {
			return err
		}
		if len(ing.Status.LoadBalancer.Ingress) != 1 || len(hr.Status.Parents) != 1 {
			return fmt.Errorf("Ingress status %+v, HTTPRoute parents %d", ing.Status.LoadBalancer, len(hr.Status.Parents))
		}
		if !controllerutil.ContainsFinalizer(sec, v1alpha1.CleanupFinalizer) {
			return fmt.Errorf("Secret without the finalizer")
		}
		ss := &v1alpha1.SyncSecretList{}
		if err := e.Hub.Client.List(e.ctx, ss, client.InNamespace(tenantNS)); err != nil || len(ss.Items) != 1 {
			return fmt.Errorf("%d SyncSecrets (%v)", len(ss.Items), err)
		}
		return nil
	})
	stop()

	// Deleted while no ccm runs: the finalizer goes by hand, the mirror stays on the hub.
	gone := e.getService(t, "shop", "gone")
	controllerutil.RemoveFinalizer(gone, v1alpha1.CleanupFinalizer)
	if err := e.Tenant.Client.Update(e.ctx, gone); err != nil {
		t.Fatal(err)
	}
	if err := e.Tenant.Client.Delete(e.ctx, gone); err != nil {
		t.Fatal(err)
	}
	// Addresses/default as the node controller keeps it for a cluster with serving nodes.
	objects.Create(t, e.Hub.Client, &v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: v1alpha1.DefaultAddressesName},
		Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "10.0.0.1"}}}})
	return f
}

func errorsJoin(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// release runs Release against the pair with hub configuration hubCfg.
func (e *env) release(t *testing.T, hubCfg *rest.Config, hubWait time.Duration) ReleaseReport {
	t.Helper()
	ctx := ctrl.LoggerInto(e.ctx, testr.NewWithOptions(t, testr.Options{LogTimestamp: true}).WithName("release"))
	start := time.Now()
	rep, err := Release(ctx, e.Tenant.Config, hubCfg, testenv.Scheme(), ReleaseOptions{
		Options: Options{ClusterName: tenantNS, EnableCloudProvider: true, EnableGatewayAPI: true}, HubWait: hubWait})
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	t.Logf("release took %v: %s", time.Since(start).Round(time.Millisecond), rep.Summary())
	return rep
}

// tenantReleased fails unless nothing of kubelb is left on the tenant objects of f: no
// finalizer, no address or condition kubelb wrote, no twin.
func (e *env) tenantReleased(t *testing.T, f tenantFixture) {
	t.Helper()
	svc := e.getService(t, "shop", "lb")
	if hasFinalizer(svc) || len(svc.Status.LoadBalancer.Ingress) > 0 || meta.FindStatusCondition(svc.Status.Conditions, lbaddress.ConditionAddressAssigned) != nil {
		t.Errorf("Service shop/lb after release: finalizers %v, status %+v", svc.Finalizers, svc.Status)
	}
	sec := &corev1.Secret{}
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(f.secret), sec); err != nil || controllerutil.ContainsFinalizer(sec, v1alpha1.CleanupFinalizer) {
		t.Errorf("Secret shop/tls after release: %v, finalizers %v", err, sec.Finalizers)
	}
	hr := &gwapiv1.HTTPRoute{}
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(f.hr), hr); err != nil || len(hr.Status.Parents) != 0 {
		t.Errorf("HTTPRoute shop/api after release: %v, parents %+v", err, hr.Status.Parents)
	}
	for _, twin := range []string{"web-nodeport", "api-nodeport"} {
		err := e.Tenant.Client.Get(e.ctx, client.ObjectKey{Namespace: "shop", Name: twin}, &corev1.Service{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("twin shop/%s after release: %v", twin, err)
		}
	}
}

// TestRelease: the one-shot release hands back everything a ccm made — hub mirrors of
// existing and of gone objects, Addresses/default, the Services' address and condition, the
// Ingress's address, kubelb's route parents, the twins, the finalizers — and a second run
// finds nothing to do.
func TestRelease(t *testing.T) {
	e := newEnv(t)
	f := e.mirrorAll(t)

	rep := e.release(t, e.Hub.Config, wait)
	if !rep.HubReachable || !rep.AddressesDeleted || rep.MirrorsOfGone != 1 || len(rep.LeftOnHub) != 0 {
		t.Errorf("report %+v", rep)
	}
	for what, got := range map[string][]string{
		"shop/lb": rep.Services, "shop/tls": rep.Secrets, "Ingress shop/web": rep.Layer7,
		"HTTPRoute shop/api": rep.Layer7, "shop/web-nodeport": rep.Twins, "shop/api-nodeport": rep.Twins,
	} {
		if !slices.Contains(got, what) {
			t.Errorf("report does not name %s: %v", what, got)
		}
	}
	e.tenantReleased(t, f)
	ing := &networkingv1.Ingress{}
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKeyFromObject(f.ing), ing); err != nil || len(ing.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("Ingress shop/web after release: %v, status %+v", err, ing.Status.LoadBalancer)
	}
	testsupport.Eventually(t, wait, "nothing of the tenant left on the hub", func() error {
		left, err := leftOnHub(e.ctx, e.Hub.Client, tenantNS)
		if err != nil {
			return err
		}
		lbs := &v1alpha1.LoadBalancerList{}
		if err := e.Hub.Client.List(e.ctx, lbs, client.InNamespace(tenantNS)); err != nil {
			return err
		}
		if len(left) > 0 || len(lbs.Items) > 0 {
			return fmt.Errorf("left %v, %d LoadBalancers (being deleted)", left, len(lbs.Items))
		}
		return nil
	})

	again := e.release(t, e.Hub.Config, wait)
	if len(again.Services)+len(again.Secrets)+len(again.Layer7)+len(again.Twins)+again.MirrorsOfGone != 0 || again.AddressesDeleted || !again.HubReachable {
		t.Errorf("second release did something: %+v", again)
	}
	if !strings.Contains(again.Summary(), "nothing of this cluster is left") {
		t.Errorf("summary %q", again.Summary())
	}
}

// TestReleaseHubUnreachable: with the hub out of reach the release waits no longer than the
// hub wait, releases the tenant side all the same (finalizers, the Services' address and
// condition, kubelb's route parents, twins) and says the hub's objects were left.
func TestReleaseHubUnreachable(t *testing.T) {
	e := newEnv(t)
	f := e.mirrorAll(t)

	dead := rest.CopyConfig(e.Hub.Config)
	dead.Host = "https://127.0.0.1:1" // nothing listens: refused at once
	const hubWait = 3 * time.Second
	start := time.Now()
	rep := e.release(t, dead, hubWait)
	if took := time.Since(start); took > hubWait+20*time.Second || took < hubWait-hubRetry {
		t.Errorf("release took %v with a hub wait of %v: it must ask the hub for that long, and not much longer", took, hubWait)
	}
	if rep.HubReachable || !slices.Contains(rep.Services, "shop/lb") || !slices.Contains(rep.Secrets, "shop/tls") ||
		!strings.Contains(rep.Summary(), "not reachable") {
		t.Errorf("report %+v: %s", rep, rep.Summary())
	}
	e.tenantReleased(t, f)
	// The hub keeps its mirrors (the Tenant's deletion removes them).
	if err := e.Hub.Client.Get(e.ctx, client.ObjectKey{Namespace: tenantNS, Name: string(f.svc.UID)}, &v1alpha1.LoadBalancer{}); err != nil {
		t.Errorf("the hub's LoadBalancer of shop/lb: %v", err)
	}
	// Then with the hub back, a second release removes what was left there.
	rep = e.release(t, e.Hub.Config, wait)
	if !rep.HubReachable || len(rep.LeftOnHub) != 0 {
		t.Errorf("release with the hub back: %+v", rep)
	}
}
