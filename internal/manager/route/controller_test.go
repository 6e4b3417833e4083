package route

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	statuspkg "kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
	"kubelb.dev/kubelb/internal/translate"
)

// TestController runs the Route controller (with the LoadBalancer controller, sharing the
// port allocator as in cmd/kubelb) in-process against a real API server. The subtests
// share the API server and run one after another, each with a manager of its own.
func TestController(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	objects.Create(t, c, objects.Namespace(managerNS, nil))
	cfg := objects.Config(managerNS, kubelbv1alpha1.ConfigSpec{
		AnnotationSettings: objects.AnnotationSettings(kubelbv1alpha1.AnnotatedResourceGateway, kubelbv1alpha1.Annotations{"default.example.com/gw": "yes"}),
		Ingress:            kubelbv1alpha1.IngressSettings{Class: ptr.To("config-ingress")},
		GatewayAPI:         kubelbv1alpha1.GatewayAPISettings{Class: ptr.To("config-gateway")},
	})
	objects.Create(t, c, cfg)
	portRange := portalloc.Range{Min: 20000, Max: 20099}

	// The Routes a KubeLB CE ccm writes get their hub Services; the status reports them.
	t.Run("CEFixtures", func(t *testing.T) {
		ns := "tenant-probe"
		tenant := objects.CreateTenant(t, c, objects.Tenant("probe", kubelbv1alpha1.TenantSpec{GatewayAPI: kubelbv1alpha1.TenantGatewayAPISettings{GatewayAPISettings: kubelbv1alpha1.GatewayAPISettings{Class: ptr.To("tenant-gateway")}}}))
		m := startManager(t, hub, portRange)
		routes := ceRoutes(t, ns)
		gw := routes["Gateway"]
		gw.Spec.Source.Kubernetes.Route.SetAnnotations(map[string]string{"keep.example.com/x": "1", "drop.example.com/y": "2"})
		for _, kind := range []string{"Gateway", "Ingress", "HTTPRoute", "GRPCRoute"} {
			if err := c.Create(ctx, routes[kind]); err != nil {
				t.Fatalf("creating the %s Route: %v", kind, err)
			}
		}

		// The Gateway's hub Service: one port per listener, the Tenant's gateway class.
		gwSvcName := hubnames.GatewayServiceName(gw.Name)
		if gwSvcName != "gateway-"+gw.Name {
			t.Fatalf("hub Service name %s", gwSvcName)
		}
		gwSvc := waitService(t, c, ns, gwSvcName, nil)
		if gwSvc.Spec.Type != corev1.ServiceTypeLoadBalancer || ptr.Deref(gwSvc.Spec.LoadBalancerClass, "") != "tenant-gateway" {
			t.Errorf("Gateway hub Service spec %+v", gwSvc.Spec)
		}
		if diff := cmp.Diff(hubnames.EnvoyPodLabels(ns), gwSvc.Spec.Selector); diff != "" {
			t.Errorf("selector: %s", diff)
		}
		wantLabels := map[string]string{
			kubelbv1alpha1.LabelManagedBy: "kubelb", kubelbv1alpha1.LabelTenantName: "probe", kubelbv1alpha1.LabelRouteName: gw.Name,
			kubelbv1alpha1.LabelOriginName: "kubelb", kubelbv1alpha1.LabelOriginNamespace: "shop",
			kubelbv1alpha1.LabelOriginResourceKind: "Gateway.gateway.networking.k8s.io",
		}
		if diff := cmp.Diff(wantLabels, gwSvc.Labels); diff != "" {
			t.Errorf("Gateway hub Service labels (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]string{"keep.example.com/x": "1", "default.example.com/gw": "yes"}, gwSvc.Annotations); diff != "" {
			t.Errorf("Gateway hub Service annotations (-want +got):\n%s", diff)
		}
		if ref := metav1.GetControllerOf(gwSvc); ref == nil || ref.Kind != "Route" || ref.Name != gw.Name {
			t.Errorf("controller of the Gateway hub Service: %+v", ref)
		}
		if len(gwSvc.Spec.Ports) != 2 {
			t.Fatalf("Gateway hub Service ports %v", targets(gwSvc))
		}
		gwTargets := []int32{gwSvc.Spec.Ports[0].TargetPort.IntVal, gwSvc.Spec.Ports[1].TargetPort.IntVal}
		if diff := cmp.Diff([]string{
			fmt.Sprintf("tcp-80 TCP 80->%d", gwTargets[0]), fmt.Sprintf("tcp-443 TCP 443->%d", gwTargets[1]),
		}, targets(gwSvc)); diff != "" {
			t.Errorf("Gateway hub Service ports (-want +got):\n%s", diff)
		}

		// The Ingress rides on the tenant's shared Ingress Service, of the Config's class.
		ingSvc := waitService(t, c, ns, kubelbv1alpha1.IngressServiceName, nil)
		if ptr.Deref(ingSvc.Spec.LoadBalancerClass, "") != "config-ingress" || ingSvc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			t.Errorf("Ingress hub Service spec %+v", ingSvc.Spec)
		}
		if diff := cmp.Diff(hubnames.EnvoyPodLabels(ns), ingSvc.Spec.Selector); diff != "" {
			t.Errorf("selector: %s", diff)
		}
		if diff := cmp.Diff(map[string]string{kubelbv1alpha1.LabelManagedBy: "kubelb", kubelbv1alpha1.LabelTenantName: "probe",
			kubelbv1alpha1.LabelIngressService: "true"}, ingSvc.Labels); diff != "" {
			t.Errorf("Ingress hub Service labels (-want +got):\n%s", diff)
		}
		if len(ingSvc.Spec.Ports) != 2 {
			t.Fatalf("Ingress hub Service ports %v", targets(ingSvc))
		}
		ingTargets := []int32{ingSvc.Spec.Ports[0].TargetPort.IntVal, ingSvc.Spec.Ports[1].TargetPort.IntVal}
		if diff := cmp.Diff([]string{
			fmt.Sprintf("http TCP 80->%d", ingTargets[0]), fmt.Sprintf("https TCP 443->%d", ingTargets[1]),
		}, targets(ingSvc)); diff != "" {
			t.Errorf("Ingress hub Service ports (-want +got):\n%s", diff)
		}
		all := append(slices.Clone(gwTargets), ingTargets...)
		for _, p := range all {
			if !portRange.Contains(p) {
				t.Errorf("listener port %d outside %s", p, portRange)
			}
		}
		if slices.Sort(all); len(slices.Compact(all)) != 4 {
			t.Errorf("listener ports not distinct: %v", all)
		}

		// The status writer's part (resources.route.status) goes through the same Sink; it
		// must survive this controller's status writes.
		gwRoute := waitCondition(t, c, ns, gw.Name, metav1.ConditionTrue, ReasonApplied)
		if _, _, err := m.sink.Route(ctx, gwRoute, func(st *kubelbv1alpha1.RouteStatus) {
			st.Resources.Route.Status = runtime.RawExtension{Raw: []byte(`{"addresses":[{"type":"IPAddress","value":"192.0.2.1"}]}`)}
		}); err != nil {
			t.Fatal(err)
		}

		// Statuses: the Gateway's Service with its ports; the address once it has one.
		objects.PlayLoadBalancer(t, c, waitTimeout, client.ObjectKey{Namespace: ns, Name: gwSvcName}, "127.0.0.20", nil)
		svcKey := ns + "/" + gwSvcName
		testsupport.Eventually(t, waitTimeout, "the Gateway Route's status with the address", func() error {
			gwRoute = getRoute(t, c, ns, gw.Name)
			entry, ok := gwRoute.Status.Resources.Services[svcKey]
			if !ok {
				return fmt.Errorf("services %v", gwRoute.Status.Resources.Services)
			}
			var st corev1.ServiceStatus
			if err := json.Unmarshal(entry.Status.Raw, &st); err != nil {
				return fmt.Errorf("status %s: %w", entry.Status.Raw, err)
			}
			if len(st.LoadBalancer.Ingress) != 1 || st.LoadBalancer.Ingress[0].IP != "127.0.0.20" {
				return fmt.Errorf("service status %s", entry.Status.Raw)
			}
			return nil
		})
		entry := gwRoute.Status.Resources.Services[svcKey]
		if entry.Name != gwSvcName || entry.Namespace != ns || entry.GeneratedName != gwSvcName || entry.Kind != "Service" {
			t.Errorf("services entry %+v", entry.ResourceState)
		}
		if len(entry.Ports) != 2 || entry.Ports[0].TargetPort.IntVal != gwTargets[0] || entry.Ports[1].TargetPort.IntVal != gwTargets[1] || entry.Ports[1].Port != 443 {
			t.Errorf("services entry ports %+v", entry.Ports)
		}
		if c := meta.FindStatusCondition(entry.Conditions, ConditionApplied); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("services entry conditions %+v", entry.Conditions)
		}
		if got := gwRoute.Status.Resources.Source; got != "Gateway shop/kubelb" {
			t.Errorf("source %q", got)
		}
		if r := gwRoute.Status.Resources.Route; r.Kind != "Gateway" || r.APIVersion != "gateway.networking.k8s.io/v1" || r.Name != "kubelb" || r.Namespace != "shop" {
			t.Errorf("route %+v", r)
		}
		// A KubeLB CE ccm copies status back only once generatedName is set: every kind has it,
		// naming the Route (kubelb makes no hub Ingress or Gateway).
		for _, kind := range []string{"Gateway", "Ingress", "HTTPRoute", "GRPCRoute"} {
			testsupport.Eventually(t, waitTimeout, "generatedName of the "+kind+" Route", func() error {
				r := &kubelbv1alpha1.Route{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(routes[kind]), r); err != nil {
					return err
				}
				if got := r.Status.Resources.Route.GeneratedName; got != r.Name {
					return fmt.Errorf("status.resources.route.generatedName %q, want %q", got, r.Name)
				}
				return nil
			})
		}
		if raw := string(gwRoute.Status.Resources.Route.Status.Raw); raw != `{"addresses":[{"type":"IPAddress","value":"192.0.2.1"}]}` {
			t.Errorf("resources.route.status of the other owner lost or changed: %q", raw)
		}
		// One writer of the status, the Sink (field owner kubelb-status), which kept the
		// other part's field above.
		for _, f := range gwRoute.ManagedFields {
			if f.Subresource == "status" && f.Operation == metav1.ManagedFieldsOperationApply && f.Manager != statuspkg.FieldOwner {
				t.Errorf("status applied by %s too, want only %s", f.Manager, statuspkg.FieldOwner)
			}
		}

		// The Ingress Route reports the shared Service; the HTTPRoute and GRPCRoute ride on
		// the Gateway and have nothing of their own; the manager adds no finalizer (a Route's
		// deletion needs no cleanup the "gone" pass does not do).
		ing := waitCondition(t, c, ns, routes["Ingress"].Name, metav1.ConditionTrue, ReasonApplied)
		if e, ok := ing.Status.Resources.Services[ns+"/"+kubelbv1alpha1.IngressServiceName]; !ok || len(e.Ports) != 2 || e.Ports[0].TargetPort.IntVal != ingTargets[0] {
			t.Errorf("Ingress Route services %+v", ing.Status.Resources.Services)
		}
		if ing.Status.Resources.Source != "Ingress shop/web" {
			t.Errorf("Ingress Route source %q", ing.Status.Resources.Source)
		}
		for _, kind := range []string{"HTTPRoute", "GRPCRoute"} {
			rt := waitCondition(t, c, ns, routes[kind].Name, metav1.ConditionTrue, ReasonApplied)
			if len(rt.Status.Resources.Services) != 0 {
				t.Errorf("%s Route services %+v", kind, rt.Status.Resources.Services)
			}
		}
		for _, kind := range []string{"Gateway", "Ingress", "HTTPRoute", "GRPCRoute"} {
			if rt := getRoute(t, c, ns, routes[kind].Name); !slices.Equal(rt.Finalizers, routes[kind].Finalizers) {
				t.Errorf("%s Route finalizers %v, want the ccm's %v", kind, rt.Finalizers, routes[kind].Finalizers)
			}
		}

		// The Tenant's class going away: the Config's applies; the Service is recreated
		// (the class is immutable) with the same listener ports.
		if err := c.Patch(ctx, tenant, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"gatewayAPI":{"class":null}}}`))); err != nil {
			t.Fatal(err)
		}
		waitService(t, c, ns, gwSvcName, func(s *corev1.Service) error {
			if ptr.Deref(s.Spec.LoadBalancerClass, "") != "config-gateway" {
				return fmt.Errorf("class %v", ptr.Deref(s.Spec.LoadBalancerClass, "<nil>"))
			}
			if got := []int32{s.Spec.Ports[0].TargetPort.IntVal, s.Spec.Ports[1].TargetPort.IntVal}; !slices.Equal(got, gwTargets) {
				return fmt.Errorf("listener ports %v, were %v", got, gwTargets)
			}
			return nil
		})

		// Deleting the Gateway Route removes its Service and frees its ports.
		if err := c.Delete(ctx, getRoute(t, c, ns, gw.Name)); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gw.Name}})
		waitGone(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gwSvcName}})
		testsupport.Eventually(t, waitTimeout, "the Gateway's ports to be freed", func() error {
			for _, p := range gwTargets {
				if holder, ok := m.ports.Allocator().Holder(p); ok {
					return fmt.Errorf("port %d still held by %s", p, holder)
				}
			}
			return nil
		})
		deleteRoutes(t, c, ns)
	})

	// Two Ingress Routes share one Service; it goes with the last of them.
	t.Run("IngressServiceShared", func(t *testing.T) {
		ns := "tenant-ing"
		createNamespace(t, c, ns)
		m := startManager(t, hub, portRange)
		for _, name := range []string{"one", "two"} {
			if err := c.Create(ctx, ingressRoute(ns, name)); err != nil {
				t.Fatal(err)
			}
		}
		one := waitCondition(t, c, ns, "one", metav1.ConditionTrue, ReasonApplied)
		two := waitCondition(t, c, ns, "two", metav1.ConditionTrue, ReasonApplied)
		key := ns + "/" + kubelbv1alpha1.IngressServiceName
		if diff := cmp.Diff(one.Status.Resources.Services[key].Ports, two.Status.Resources.Services[key].Ports); diff != "" || len(one.Status.Resources.Services[key].Ports) != 2 {
			t.Errorf("the two Ingress Routes report different Services: %s", diff)
		}
		svc := waitService(t, c, ns, kubelbv1alpha1.IngressServiceName, nil)
		ports := targets(svc)
		if svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster {
			t.Errorf("externalTrafficPolicy %q without an allow list, want Cluster", svc.Spec.ExternalTrafficPolicy)
		}
		// An Ingress that lists its clients' addresses (ingress-nginx allowlist-source-range)
		// needs them at Envoy: the Service keeps them (Local), with the same ports.
		two = getRoute(t, c, ns, "two")
		two.Spec.Source.Kubernetes.Route.SetAnnotations(map[string]string{translate.NginxAnnotationPrefix + "allowlist-source-range": "192.0.2.0/24"})
		if err := c.Update(ctx, two); err != nil {
			t.Fatal(err)
		}
		waitService(t, c, ns, kubelbv1alpha1.IngressServiceName, func(s *corev1.Service) error {
			if s.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal || !slices.Equal(targets(s), ports) {
				return fmt.Errorf("externalTrafficPolicy %q, target ports %v", s.Spec.ExternalTrafficPolicy, targets(s))
			}
			return nil
		})

		if err := c.Delete(ctx, one); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, one)
		if svc := waitService(t, c, ns, kubelbv1alpha1.IngressServiceName, nil); !slices.Equal(targets(svc), ports) {
			t.Errorf("the Ingress Service changed when one of two Ingress Routes went: %v → %v", ports, targets(svc))
		}
		if err := c.Delete(ctx, two); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, two)
		waitGone(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kubelbv1alpha1.IngressServiceName}})
		testsupport.Eventually(t, waitTimeout, "the Ingress Service's ports to be freed", func() error {
			for _, p := range []int32{80, 443} {
				if port, ok := m.ports.Allocator().Lookup(portalloc.IngressKey(ns, p)); ok {
					return fmt.Errorf("Ingress port %d still holds listener port %d", p, port)
				}
			}
			return nil
		})
	})

	// Listener changes add and remove ports; bad listeners are reported, the others served.
	t.Run("GatewayListenersChange", func(t *testing.T) {
		ns := "tenant-gw"
		createNamespace(t, c, ns)
		m := startManager(t, hub, portRange)
		rt := gatewayRoute(ns, "gw", listener("http", 80, "HTTP"), listener("https", 443, "HTTPS"))
		if err := c.Create(ctx, rt); err != nil {
			t.Fatal(err)
		}
		waitCondition(t, c, ns, "gw", metav1.ConditionTrue, ReasonApplied)
		svc := waitService(t, c, ns, hubnames.GatewayServiceName("gw"), nil)
		http80 := svc.Spec.Ports[0].TargetPort.IntVal

		// 443 goes, DNS over UDP and TCP comes, and three listeners are refused.
		listeners := []any{listener("http", 80, "HTTP"), listener("http-alt", 80, "HTTP"),
			listener("dns", 53, "UDP"), listener("dns-tcp", 53, "TCP"),
			listener("zero", 0, "HTTP"), listener("big", 70000, "TCP"), listener("odd", 8080, "SCTP")}
		objects.Update(t, c, getRoute(t, c, ns, "gw"), func(rt *kubelbv1alpha1.Route) { // status writes race with the update
			if err := unstructured.SetNestedSlice(rt.Spec.Source.Kubernetes.Route.Object, listeners, "spec", "listeners"); err != nil {
				t.Fatal(err)
			}
		})
		got := waitCondition(t, c, ns, "gw", metav1.ConditionFalse, ReasonInvalidListeners)
		cond := meta.FindStatusCondition(got.Status.Resources.Route.Conditions, ConditionApplied)
		for _, want := range []string{`listener "zero"`, `listener "big"`, `listener "odd"`} {
			if !strings.Contains(cond.Message, want) {
				t.Errorf("message %q does not name %s", cond.Message, want)
			}
		}
		waitEvent(t, c, ns, "gw", ReasonInvalidListeners)
		svc = waitService(t, c, ns, hubnames.GatewayServiceName("gw"), func(s *corev1.Service) error {
			if len(s.Spec.Ports) != 3 {
				return fmt.Errorf("ports %v", targets(s))
			}
			return nil
		})
		var names []string
		for _, p := range svc.Spec.Ports {
			names = append(names, p.Name)
			if p.Name == "tcp-80" && p.TargetPort.IntVal != http80 {
				t.Errorf("port 80 moved from listener port %d to %d", http80, p.TargetPort.IntVal)
			}
		}
		if diff := cmp.Diff([]string{"tcp-53", "udp-53", "tcp-80"}, names); diff != "" {
			t.Errorf("port names (-want +got):\n%s", diff)
		}
		if n := len(m.ports.Allocator().Snapshot()); n != 3 {
			t.Errorf("%d ports allocated, want 3 (443's freed)", n)
		}
		deleteRoutes(t, c, ns)
	})

	// The tenant label of a Route's hub Services names the tenant whose namespace the Route
	// is in, whatever the Route's own labels (which the tenant writes) claim.
	t.Run("TenantLabelComesFromTheNamespace", func(t *testing.T) {
		ns := "tenant-ra"
		createNamespace(t, c, ns)
		startManager(t, hub, portRange)
		gw := gatewayRoute(ns, "claims-b", listener("http", 80, "HTTP"))
		in := ingressRoute(ns, "ing-claims-b")
		for _, rt := range []*kubelbv1alpha1.Route{gw, in} {
			if rt.Labels == nil {
				rt.Labels = map[string]string{}
			}
			rt.Labels[kubelbv1alpha1.LabelTenantName] = "b"
			if err := c.Create(ctx, rt); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{hubnames.GatewayServiceName("claims-b"), kubelbv1alpha1.IngressServiceName} {
			if got := waitService(t, c, ns, name, nil).Labels[kubelbv1alpha1.LabelTenantName]; got != "ra" {
				t.Errorf("hub Service %s tenant label %q, want %q (from namespace %s)", name, got, "ra", ns)
			}
		}
		deleteRoutes(t, c, ns)
	})

	// Tenant switches: no hub Service while disabled, back when enabled.
	t.Run("DisabledByTenant", func(t *testing.T) {
		ns := "tenant-off"
		tenant := objects.CreateTenant(t, c, objects.Tenant("off", kubelbv1alpha1.TenantSpec{}))
		startManager(t, hub, portRange)
		for _, rt := range []*kubelbv1alpha1.Route{gatewayRoute(ns, "gw", listener("http", 80, "HTTP")), ingressRoute(ns, "ing")} {
			if err := c.Create(ctx, rt); err != nil {
				t.Fatal(err)
			}
		}
		waitService(t, c, ns, hubnames.GatewayServiceName("gw"), nil)
		waitService(t, c, ns, kubelbv1alpha1.IngressServiceName, nil)

		if err := c.Patch(ctx, tenant, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"gatewayAPI":{"disable":true},"ingress":{"disable":true}}}`))); err != nil {
			t.Fatal(err)
		}
		gw := waitCondition(t, c, ns, "gw", metav1.ConditionFalse, ReasonDisabled)
		ing := waitCondition(t, c, ns, "ing", metav1.ConditionFalse, ReasonDisabled)
		// The ccm carries these messages to the tenant's objects: they say who disabled what.
		if cond := meta.FindStatusCondition(ing.Status.Resources.Route.Conditions, ConditionApplied); !strings.Contains(cond.Message, "hub's platform team (spec.ingress.disable") {
			t.Errorf("Ingress Route %+v", cond)
		}
		if cond := meta.FindStatusCondition(gw.Status.Resources.Route.Conditions, ConditionApplied); !strings.Contains(cond.Message, "hub's platform team (spec.gatewayAPI.disable") {
			t.Errorf("Gateway Route %+v", cond)
		}
		waitGone(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hubnames.GatewayServiceName("gw")}})
		waitGone(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kubelbv1alpha1.IngressServiceName}})
		if len(gw.Status.Resources.Services) != 0 {
			t.Errorf("disabled Gateway Route still reports %v", gw.Status.Resources.Services)
		}

		if err := c.Patch(ctx, tenant, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"gatewayAPI":{"disable":false},"ingress":{"disable":false}}}`))); err != nil {
			t.Fatal(err)
		}
		waitCondition(t, c, ns, "gw", metav1.ConditionTrue, ReasonApplied)
		waitCondition(t, c, ns, "ing", metav1.ConditionTrue, ReasonApplied)
		waitService(t, c, ns, hubnames.GatewayServiceName("gw"), nil)
		waitService(t, c, ns, kubelbv1alpha1.IngressServiceName, nil)
		deleteRoutes(t, c, ns)
	})

	// A tiny range: the Route that does not fit says so and gets its ports once freed.
	t.Run("PortsExhausted", func(t *testing.T) {
		ns := "tenant-full"
		createNamespace(t, c, ns)
		startManager(t, hub, portalloc.Range{Min: 21000, Max: 21001})
		if err := c.Create(ctx, ingressRoute(ns, "ing")); err != nil {
			t.Fatal(err)
		}
		waitCondition(t, c, ns, "ing", metav1.ConditionTrue, ReasonApplied)
		if err := c.Create(ctx, gatewayRoute(ns, "gw", listener("http", 80, "HTTP"))); err != nil {
			t.Fatal(err)
		}
		got := waitCondition(t, c, ns, "gw", metav1.ConditionFalse, ReasonPortsExhausted)
		if len(got.Status.Resources.Services) != 0 {
			t.Errorf("exhausted Route reports %v", got.Status.Resources.Services)
		}
		waitEvent(t, c, ns, "gw", ReasonPortsExhausted)
		if err := c.Delete(ctx, getRoute(t, c, ns, "ing")); err != nil {
			t.Fatal(err)
		}
		waitCondition(t, c, ns, "gw", metav1.ConditionTrue, ReasonApplied)
		waitService(t, c, ns, hubnames.GatewayServiceName("gw"), func(s *corev1.Service) error {
			if p := s.Spec.Ports[0].TargetPort.IntVal; p != 21000 && p != 21001 {
				return fmt.Errorf("listener port %d", p)
			}
			return nil
		})

		// Ports a LoadBalancer frees go to a Route that waits, at once: the controllers share
		// one list of waiters (there is no periodic retry to fall back on).
		lb := &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lb"}, Spec: kubelbv1alpha1.LoadBalancerSpec{
			Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{AddressesReference: &corev1.ObjectReference{Name: "default"}, Ports: []kubelbv1alpha1.EndpointPort{{Port: 30000}}}},
			Ports:     []kubelbv1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		}}
		if err := c.Create(ctx, lb); err != nil {
			t.Fatal(err)
		}
		waitService(t, c, ns, hubnames.LoadBalancerServiceName("lb"), nil)
		if err := c.Create(ctx, gatewayRoute(ns, "gw2", listener("http", 80, "HTTP"))); err != nil {
			t.Fatal(err)
		}
		waitCondition(t, c, ns, "gw2", metav1.ConditionFalse, ReasonPortsExhausted)
		if err := c.Delete(ctx, lb); err != nil {
			t.Fatal(err)
		}
		waitCondition(t, c, ns, "gw2", metav1.ConditionTrue, ReasonApplied)
		deleteRoutes(t, c, ns)
	})

	// A new manager rebuilds every allocation from the hub Services — LoadBalancers' and
	// Routes' — keeps them and, finding nothing to change, writes nothing.
	t.Run("RestartKeepsPorts", func(t *testing.T) {
		ns := "tenant-restart"
		createNamespace(t, c, ns)
		m1 := startManager(t, hub, portRange)
		lb := &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lb"}, Spec: kubelbv1alpha1.LoadBalancerSpec{
			Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{AddressesReference: &corev1.ObjectReference{Name: "default"}, Ports: []kubelbv1alpha1.EndpointPort{{Port: 30000}}}},
			Ports:     []kubelbv1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		}}
		for _, o := range []client.Object{lb, gatewayRoute(ns, "gw", listener("http", 80, "HTTP"), listener("dns", 53, "UDP")), ingressRoute(ns, "ing")} {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		waitCondition(t, c, ns, "gw", metav1.ConditionTrue, ReasonApplied)
		waitCondition(t, c, ns, "ing", metav1.ConditionTrue, ReasonApplied)
		waitService(t, c, ns, hubnames.LoadBalancerServiceName("lb"), nil)
		testsupport.Eventually(t, waitTimeout, "5 ports allocated", func() error {
			if n := len(m1.ports.Allocator().Snapshot()); n != 5 {
				return fmt.Errorf("%d", n)
			}
			return nil
		})
		before := m1.ports.Allocator().Snapshot()
		m1.stop()

		m2 := startManager(t, hub, portRange)
		// A new Gateway makes the new manager rebuild, and gets a port nobody holds.
		if err := c.Create(ctx, gatewayRoute(ns, "gw2", listener("http", 8080, "HTTP"))); err != nil {
			t.Fatal(err)
		}
		waitCondition(t, c, ns, "gw2", metav1.ConditionTrue, ReasonApplied)
		after := m2.ports.Allocator().Snapshot()
		newKey := portalloc.RouteKey(ns, "gw2", corev1.ProtocolTCP, 8080)
		newPort := after[newKey]
		delete(after, newKey)
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("allocations after the restart (-before +after):\n%s", diff)
		}
		for k, p := range before {
			if p == newPort {
				t.Errorf("the new Gateway got port %d of %s", p, k)
			}
		}
		// The settled Routes and LoadBalancer cost the new manager no write.
		for k, n := range m2.writes.Snapshot() {
			if !strings.Contains(k, "gw2") && !strings.Contains(k, "/events") {
				t.Errorf("the restarted manager wrote %s (%d times)", k, n)
			}
		}
		deleteRoutes(t, c, ns)
		if err := c.Delete(ctx, lb); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, lb)
	})

	// A Route's deletion needs no finalizer. Routes deleted while no manager runs leave
	// their Gateway Service (owned, but no garbage collector here, and none needed) and the
	// Ingress Service: the next manager deletes both at start-up and frees their ports. A
	// Route carrying the cleanup finalizer of an earlier version is cleaned up and the
	// finalizer removed, so its deletion completes.
	t.Run("DeletionNeedsNoFinalizer", func(t *testing.T) {
		ns := "tenant-gone"
		createNamespace(t, c, ns)
		m1 := startManager(t, hub, portRange)
		gw, ing := gatewayRoute(ns, "gw", listener("http", 80, "HTTP")), ingressRoute(ns, "ing")
		for _, rt := range []*kubelbv1alpha1.Route{gw, ing} {
			if err := c.Create(ctx, rt); err != nil {
				t.Fatal(err)
			}
			waitCondition(t, c, ns, rt.Name, metav1.ConditionTrue, ReasonApplied)
		}
		gwSvc := waitService(t, c, ns, hubnames.GatewayServiceName("gw"), nil)
		ingSvc := waitService(t, c, ns, kubelbv1alpha1.IngressServiceName, nil)
		m1.stop()
		for _, rt := range []*kubelbv1alpha1.Route{gw, ing} {
			if err := c.Delete(ctx, rt); err != nil {
				t.Fatal(err)
			}
			waitGone(t, c, rt)
		}

		m2 := startManager(t, hub, portRange)
		waitGone(t, c, gwSvc)
		waitGone(t, c, ingSvc)
		testsupport.Eventually(t, waitTimeout, "the ports of the Routes that went to be freed", func() error {
			for k := range m2.ports.Allocator().Snapshot() {
				if k.Namespace == ns {
					return fmt.Errorf("%s still allocated", k)
				}
			}
			return nil
		})

		old := gatewayRoute(ns, "old", listener("http", 80, "HTTP"))
		old.Finalizers = []string{kubelbv1alpha1.CleanupFinalizer} // as an earlier manager left it
		if err := c.Create(ctx, old); err != nil {
			t.Fatal(err)
		}
		waitCondition(t, c, ns, "old", metav1.ConditionTrue, ReasonApplied)
		oldSvc := waitService(t, c, ns, hubnames.GatewayServiceName("old"), nil)
		if err := c.Delete(ctx, old); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, old)
		waitGone(t, c, oldSvc)
		testsupport.Eventually(t, waitTimeout, "the port of the Route with the legacy finalizer to be freed", func() error {
			if _, ok := m2.ports.Allocator().Lookup(portalloc.RouteKey(ns, "old", corev1.ProtocolTCP, 80)); ok {
				return fmt.Errorf("still allocated")
			}
			return nil
		})
	})

	// A Route of a kind kubelb does not serve says so; what it had as a Gateway goes.
	t.Run("UnsupportedKind", func(t *testing.T) {
		ns := "tenant-odd"
		createNamespace(t, c, ns)
		m := startManager(t, hub, portRange)
		if err := c.Create(ctx, gatewayRoute(ns, "odd", listener("http", 80, "HTTP"))); err != nil {
			t.Fatal(err)
		}
		waitService(t, c, ns, hubnames.GatewayServiceName("odd"), nil)
		// The controller may still be writing the Route's status: retry on a conflict.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			rt := getRoute(t, c, ns, "odd")
			rt.Spec.Source.Kubernetes.Route.SetAPIVersion("example.com/v1")
			rt.Spec.Source.Kubernetes.Route.SetKind("Widget")
			return c.Update(ctx, rt)
		}); err != nil {
			t.Fatal(err)
		}
		got := waitCondition(t, c, ns, "odd", metav1.ConditionFalse, ReasonUnsupportedKind)
		waitGone(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hubnames.GatewayServiceName("odd")}})
		if _, ok := m.ports.Allocator().Lookup(portalloc.RouteKey(ns, "odd", corev1.ProtocolTCP, 80)); ok {
			t.Errorf("the former Gateway still holds its port")
		}
		if len(got.Status.Resources.Services) != 0 {
			t.Errorf("services %v", got.Status.Resources.Services)
		}
		if cond := meta.FindStatusCondition(got.Status.Resources.Route.Conditions, ConditionApplied); !strings.Contains(cond.Message, "Widget") {
			t.Errorf("message %q", cond.Message)
		}
		waitEvent(t, c, ns, "odd", ReasonUnsupportedKind)
		deleteRoutes(t, c, ns)
	})
}
