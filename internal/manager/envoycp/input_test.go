package envoycp_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/manager/envoycp"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/xds"
)

const managerNamespace = "kubelb"

var managedBy = map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}

func labels(extra ...string) map[string]string {
	out := map[string]string{}
	for i := 0; i+1 < len(extra); i += 2 {
		out[extra[i]] = extra[i+1]
	}
	return out
}

func withManagedBy(extra ...string) map[string]string {
	out := labels(extra...)
	out[v1alpha1.LabelManagedBy] = v1alpha1.LabelManagedByValue
	return out
}

// route is a Route embedding a tenant Ingress named name.
func route(ns, name string) *v1alpha1.Route {
	r := &v1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: withManagedBy()}}
	r.Spec.Endpoints = []v1alpha1.LoadBalancerEndpoints{{AddressesReference: &corev1.ObjectReference{Name: v1alpha1.DefaultAddressesName}}}
	r.Spec.Source.Kubernetes = &v1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
		"metadata": map[string]any{"name": "web", "namespace": "shop"},
		"spec":     map[string]any{"rules": []any{map[string]any{"host": "app.example.com"}}},
	}}}
	return r
}

func service(ns, name string, lbls map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(20080), Protocol: corev1.ProtocolTCP},
		}}}
}

// syncSecret creates a SyncSecret and returns a controller ownerReference to it.
func syncSecret(t *testing.T, c client.Client, ns, name string) metav1.OwnerReference {
	t.Helper()
	ss := &v1alpha1.SyncSecret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: withManagedBy()},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("crt"), "tls.key": []byte("key")}}
	if err := c.Create(context.Background(), ss); err != nil {
		t.Fatal(err)
	}
	return metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "SyncSecret", Name: ss.Name, UID: ss.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

func secret(ns, name string, lbls map[string]string, owners ...metav1.OwnerReference) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls, OwnerReferences: owners},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": []byte("v")}}
}

func createAll(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func names[T any](items []T, name func(*T) string) []string {
	var out []string
	for i := range items {
		out = append(out, name(&items[i]))
	}
	return out
}

// TestBuildInput: on a real API server, the translation input of a tenant holds its Routes
// (not those being deleted), only the hub Services the Route controller made (labelled
// managed-by: kubelb and route-name or ingress), only the hub Secrets a SyncSecret controls
// (labelled managed-by: kubelb), its Addresses, and the header limits of the Tenant over the
// Config's. Objects of other namespaces and objects a tenant could have made are left out.
func TestBuildInput(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	const ns, other = "tenant-a", "tenant-b"
	createAll(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: managedBy}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other, Labels: managedBy}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}},
		&v1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: v1alpha1.DefaultConfigName},
			Spec: v1alpha1.ConfigSpec{EnvoyProxy: v1alpha1.EnvoyProxy{HeaderLimits: &v1alpha1.HeaderLimits{
				MaxRequestHeadersKb: ptr.To[uint32](60), MaxRequestHeadersCount: ptr.To[uint32](100)}}}},
		&v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.DefaultAddressesName},
			Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "192.0.2.10"}}}},
		route(ns, "live"),
		route(other, "elsewhere"),
		// Services: the Route controller's two kinds, and three it did not make.
		service(ns, v1alpha1.IngressServiceName, withManagedBy(v1alpha1.LabelIngressService, "true")),
		service(ns, "gateway-live", withManagedBy(v1alpha1.LabelRouteName, "live")),
		service(ns, "tenant-made", labels(v1alpha1.LabelRouteName, "live")),
		service(ns, "loadbalancer-hub-service", withManagedBy(v1alpha1.LabelLoadBalancerName, "x")),
		service(ns, "not-the-ingress", withManagedBy(v1alpha1.LabelIngressService, "false")),
		service(other, "gateway-elsewhere", withManagedBy(v1alpha1.LabelRouteName, "elsewhere")),
	)
	going := route(ns, "going")
	going.Finalizers = []string{v1alpha1.CleanupFinalizer}
	createAll(t, c, going)
	if err := c.Delete(ctx, going); err != nil {
		t.Fatal(err)
	}
	owner := syncSecret(t, c, ns, "ss-1")
	notController := owner
	notController.Controller = nil
	createAll(t, c,
		secret(ns, "synced", withManagedBy(v1alpha1.LabelOriginName, "app-tls", v1alpha1.LabelOriginNamespace, "shop"), owner),
		secret(ns, "unlabelled", nil, owner),
		secret(ns, "kubeconfig", withManagedBy()),
		secret(ns, "not-controller", withManagedBy(), notController),
		secret(ns, "other-owner", withManagedBy(), metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u", Controller: ptr.To(true)}),
		secret(other, "synced-elsewhere", withManagedBy(), syncSecret(t, c, other, "ss-2")),
		// The manager's OIDC cookie keys: read into the input, never as a synced Secret.
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hubnames.OIDCCookieKeysSecret, Labels: withManagedBy()},
			Data: map[string][]byte{"login-key": []byte("key of a login")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: hubnames.OIDCCookieKeysSecret, Labels: withManagedBy()},
			Data: map[string][]byte{"elsewhere": []byte("another tenant's")}},
	)

	opts := translate.Options{ListenerAddress: "127.0.0.1"}
	in, err := envoycp.BuildInput(ctx, c, c, managerNamespace, ns, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(in.Routes, func(r *v1alpha1.Route) string { return r.Name }); !slices.Equal(got, []string{"live"}) {
		t.Errorf("Routes %v, want [live] (the one being deleted and other tenants' left out)", got)
	}
	if got := names(in.RouteServices, func(s *corev1.Service) string { return s.Name }); !slices.Equal(got, []string{"gateway-live", v1alpha1.IngressServiceName}) {
		t.Errorf("RouteServices %v, want only the Route controller's [gateway-live kubelb-ingress]", got)
	}
	if got := names(in.Secrets, func(s *corev1.Secret) string { return s.Name }); !slices.Equal(got, []string{"synced"}) {
		t.Errorf("Secrets %v, want only the SyncSecret's [synced]", got)
	}
	if len(in.OIDCCookieKeys) != 1 || string(in.OIDCCookieKeys["login-key"]) != "key of a login" {
		t.Errorf("OIDC cookie keys %q, want the tenant's Secret %s's", in.OIDCCookieKeys, hubnames.OIDCCookieKeysSecret)
	}
	if _, ok := in.Addresses[v1alpha1.DefaultAddressesName]; !ok || len(in.Addresses) != 1 {
		t.Errorf("Addresses %v", in.Addresses)
	}
	// The options given, with the tenant's endpoint limits (the defaults here).
	wantOpts := opts
	wantOpts.MaxEndpointsPerCluster, wantOpts.MaxEndpoints = int(settings.DefaultLimitEndpointsPerCluster), int(settings.DefaultLimitEndpoints)
	// And its health-check budget (a few tenants: the whole default) for the default fleet.
	wantOpts.HealthCheckProbesPerSecond, wantOpts.HealthCheckProxies = int(settings.DefaultLimitHealthCheckProbesPerSecond), int(settings.DefaultEnvoyReplicas)
	if in.Tenant != ns || in.Options != wantOpts {
		t.Errorf("tenant %q options %+v, want %+v", in.Tenant, in.Options, wantOpts)
	}
	if in.HeaderLimits == nil || *in.HeaderLimits != (ir.HeaderLimits{MaxRequestHeadersKB: 60, MaxRequestHeadersCount: 100}) {
		t.Errorf("header limits %+v, want the Config's", in.HeaderLimits)
	}

	// A Tenant's header limits replace the Config's.
	createAll(t, c, &v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1alpha1.TenantSpec{
		EnvoyProxy: v1alpha1.TenantEnvoyProxy{HeaderLimits: &v1alpha1.HeaderLimits{MaxRequestHeadersCount: ptr.To[uint32](50)}}}})
	in, err = envoycp.BuildInput(ctx, c, c, managerNamespace, ns, opts)
	if err != nil {
		t.Fatal(err)
	}
	if in.HeaderLimits == nil || *in.HeaderLimits != (ir.HeaderLimits{MaxRequestHeadersCount: 50}) {
		t.Errorf("header limits %+v, want the Tenant's {count 50}", in.HeaderLimits)
	}

	// With Ingress disabled the tenant's Ingress Routes are left out (kubelb-ingress may stay
	// for LoadBalancer hostnames); the Tenant's DNS settings reach the input. A Secret shaped
	// like a hostname certificate is not used while no Certificate (here: not even the
	// cert-manager API) stands behind it.
	tn := &v1alpha1.Tenant{}
	if err := c.Get(ctx, client.ObjectKey{Name: "a"}, tn); err != nil {
		t.Fatal(err)
	}
	tn.Spec.Ingress.Disable = true
	tn.Spec.DNS = v1alpha1.DNSSettings{WildcardDomain: ptr.To("apps.example.com"), AllowExplicitHostnames: ptr.To(true)}
	if err := c.Update(ctx, tn); err != nil {
		t.Fatal(err)
	}
	createAll(t, c,
		&v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: v1alpha1.LoadBalancerSpec{
			Endpoints: []v1alpha1.LoadBalancerEndpoints{{AddressesReference: &corev1.ObjectReference{Name: v1alpha1.DefaultAddressesName}}}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hubnames.HostnameSecretName("web"),
			Labels:      withManagedBy(v1alpha1.LabelLoadBalancerName, "web"),
			Annotations: map[string]string{"cert-manager.io/certificate-name": hubnames.HostnameSecretName("web")}}},
	)
	in, err = envoycp.BuildInput(ctx, c, c, managerNamespace, ns, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Routes) != 0 {
		t.Errorf("Routes %v with Ingress disabled", names(in.Routes, func(r *v1alpha1.Route) string { return r.Name }))
	}
	if in.DNS.WildcardDomain != "apps.example.com" || !in.DNS.AllowExplicitHostnames {
		t.Errorf("DNS %+v, want the Tenant's", in.DNS)
	}
	if len(in.HostnameSecrets) != 0 {
		t.Errorf("HostnameSecrets %v without a Certificate", in.HostnameSecrets)
	}
	// The other tenant keeps the Config's.
	in, err = envoycp.BuildInput(ctx, c, c, managerNamespace, other, opts)
	if err != nil {
		t.Fatal(err)
	}
	if in.HeaderLimits == nil || in.HeaderLimits.MaxRequestHeadersKB != 60 {
		t.Errorf("tenant-b header limits %+v, want the Config's", in.HeaderLimits)
	}
}

// TestWatchedChangesRetranslate: with the controller running against a real API server, a
// new Route, a Route spec change, a change of the Ingress hub Service's ports and of a
// synced Secret's data each rebuild the tenant, and the Report names the Routes at their
// generation. Services and Secrets come from the controller's own cache of kubelb-labelled
// objects.
func TestWatchedChangesRetranslate(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	const ns = "tenant-w"
	createAll(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: managedBy}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}},
		service(ns, v1alpha1.IngressServiceName, withManagedBy(v1alpha1.LabelIngressService, "true")),
	)
	owner := syncSecret(t, c, ns, "ss")
	sec := secret(ns, "synced", withManagedBy(), owner)
	createAll(t, c, sec)

	store := status.NewStore()
	testenv.StartManager(t, hub.Config, func(mgr ctrl.Manager) error {
		return envoycp.SetupWithManager(mgr, xds.NewServer(mgr.GetLogger().WithName("xds"), nil), store, nil, managerNamespace, translate.Options{ListenerAddress: "127.0.0.1"})
	})
	n := testenv.WaitControllerIdle(t, "envoycp", 1)

	routeRef := ir.ObjectRef{Kind: translate.KindRoute, Namespace: ns, Name: "r"}
	waitReport := func(what string, gen int64) {
		t.Helper()
		testsupport.Eventually(t, 30*time.Second, what, func() error {
			rep := store.Get(ns)
			if rep == nil {
				return fmt.Errorf("no report")
			}
			if got, ok := rep.Objects[routeRef]; !ok || got != gen {
				return fmt.Errorf("report objects %v, want %v at generation %d", rep.Objects, routeRef, gen)
			}
			return nil
		})
	}
	rebuilt := func(what string, change func()) {
		t.Helper()
		change()
		n = testenv.WaitControllerIdle(t, "envoycp", n+1)
		t.Logf("%s: %v reconciles", what, n)
	}

	r := route(ns, "r")
	rebuilt("Route created", func() { createAll(t, c, r) })
	waitReport("the new Route in the report", 1)

	rebuilt("Route spec changed", func() {
		r.Spec.Source.Kubernetes.Route.Object["spec"] = map[string]any{"rules": []any{map[string]any{"host": "other.example.com"}}}
		if err := c.Update(ctx, r); err != nil {
			t.Fatal(err)
		}
	})
	waitReport("the Route's new generation in the report", 2)

	rebuilt("Ingress Service ports changed", func() {
		svc := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.IngressServiceName}, svc); err != nil {
			t.Fatal(err)
		}
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, TargetPort: intstr.FromInt32(20443), Protocol: corev1.ProtocolTCP})
		if err := c.Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
	})

	rebuilt("synced Secret data changed", func() {
		sec.Data = map[string][]byte{"k": []byte("rotated")}
		if err := c.Update(ctx, sec); err != nil {
			t.Fatal(err)
		}
	})

	rebuilt("Route deleted", func() {
		if err := c.Delete(ctx, r); err != nil {
			t.Fatal(err)
		}
	})
	testsupport.Eventually(t, 30*time.Second, "the Route to leave the report", func() error {
		if _, ok := store.Get(ns).Objects[routeRef]; ok {
			return fmt.Errorf("still reported")
		}
		return nil
	})
}

// TestPredicates: updates that change nothing translation reads rebuild nothing — a Route's
// status write, a Service or Secret kubelb did not make.
func TestPredicates(t *testing.T) {
	t.Parallel()
	r := route("t", "r")
	r.Generation = 1
	statusOnly := r.DeepCopy()
	statusOnly.Status.Resources.Source = "x"
	if envoycp.RouteChanged().Update(event.UpdateEvent{ObjectOld: r, ObjectNew: statusOnly}) {
		t.Error("a Route status write rebuilds the tenant")
	}
	spec := r.DeepCopy()
	spec.Generation = 2
	if !envoycp.RouteChanged().Update(event.UpdateEvent{ObjectOld: r, ObjectNew: spec}) {
		t.Error("a Route spec change rebuilds nothing")
	}

	svc := service("t", v1alpha1.IngressServiceName, withManagedBy(v1alpha1.LabelIngressService, "true"))
	annotated := svc.DeepCopy()
	annotated.Annotations = map[string]string{"a": "b"}
	ports := svc.DeepCopy()
	ports.Spec.Ports[0].TargetPort = intstr.FromInt32(20081)
	addr := svc.DeepCopy()
	addr.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
	foreign := service("t", "x", nil)
	foreignPorts := foreign.DeepCopy()
	foreignPorts.Spec.Ports[0].Port = 81
	p := envoycp.RouteServiceChanged()
	for name, tc := range map[string]struct {
		got, want bool
	}{
		"annotation":       {p.Update(event.UpdateEvent{ObjectOld: svc, ObjectNew: annotated}), false},
		"target port":      {p.Update(event.UpdateEvent{ObjectOld: svc, ObjectNew: ports}), true},
		"address":          {p.Update(event.UpdateEvent{ObjectOld: svc, ObjectNew: addr}), true},
		"foreign update":   {p.Update(event.UpdateEvent{ObjectOld: foreign, ObjectNew: foreignPorts}), false},
		"foreign create":   {p.Create(event.CreateEvent{Object: foreign}), false},
		"label lost":       {p.Update(event.UpdateEvent{ObjectOld: svc, ObjectNew: foreign}), true},
		"ingress created":  {p.Create(event.CreateEvent{Object: svc}), true},
		"ingress deleted":  {p.Delete(event.DeleteEvent{Object: svc}), true},
		"foreign deleted":  {p.Delete(event.DeleteEvent{Object: foreign}), false},
		"ingress generic":  {p.Generic(event.GenericEvent{Object: svc}), true},
		"foreign generic":  {p.Generic(event.GenericEvent{Object: foreign}), false},
		"unchanged update": {p.Update(event.UpdateEvent{ObjectOld: svc, ObjectNew: svc}), false},
	} {
		if tc.got != tc.want {
			t.Errorf("Service %s: %v, want %v", name, tc.got, tc.want)
		}
	}

	owner := metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "SyncSecret", Name: "s", UID: "u", Controller: ptr.To(true)}
	sec := secret("t", "s", withManagedBy(), owner)
	data := sec.DeepCopy()
	data.Data = map[string][]byte{"k": []byte("w")}
	plain := secret("t", "p", withManagedBy())
	plainData := plain.DeepCopy()
	plainData.Data = map[string][]byte{"k": []byte("w")}
	s := envoycp.SyncedSecretChanged()
	if !s.Update(event.UpdateEvent{ObjectOld: sec, ObjectNew: data}) || s.Update(event.UpdateEvent{ObjectOld: sec, ObjectNew: sec}) {
		t.Error("a synced Secret's data change must rebuild, an unchanged update must not")
	}
	if s.Update(event.UpdateEvent{ObjectOld: plain, ObjectNew: plainData}) || s.Create(event.CreateEvent{Object: plain}) {
		t.Error("a Secret no SyncSecret controls rebuilds the tenant")
	}

	// The manager's OIDC cookie keys: made, changed or deleted, the tenant is rebuilt; a
	// Secret of that name outside a tenant namespace, unlabelled or a SyncSecret's is not them.
	keys := secret("tenant-t", hubnames.OIDCCookieKeysSecret, withManagedBy())
	newKey := keys.DeepCopy()
	newKey.Data = map[string][]byte{"login": []byte("another key")}
	k := envoycp.OIDCCookieKeysChanged()
	if !k.Create(event.CreateEvent{Object: keys}) || !k.Update(event.UpdateEvent{ObjectOld: keys, ObjectNew: newKey}) || !k.Delete(event.DeleteEvent{Object: keys}) ||
		k.Update(event.UpdateEvent{ObjectOld: keys, ObjectNew: keys}) {
		t.Error("the cookie keys made, changed or deleted must rebuild the tenant, an unchanged update must not")
	}
	for _, o := range []*corev1.Secret{
		secret("kubelb", hubnames.OIDCCookieKeysSecret, withManagedBy()),
		secret("tenant-t", hubnames.OIDCCookieKeysSecret, nil),
		secret("tenant-t", hubnames.OIDCCookieKeysSecret, withManagedBy(), owner),
	} {
		if k.Create(event.CreateEvent{Object: o}) {
			t.Errorf("Secret %s/%s labels %v owners %v taken for the cookie keys", o.Namespace, o.Name, o.Labels, o.OwnerReferences)
		}
	}
}
