package source

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
)

// withAddresses adds status.addresses to gw: of type IPAddress, or Hostname for values
// prefixed "host:".
func withAddresses(gw *gwapiv1.Gateway, values ...string) *gwapiv1.Gateway {
	for _, v := range values {
		a := gwapiv1.GatewayStatusAddress{Type: ptr.To(gwapiv1.IPAddressType), Value: v}
		if h, ok := strings.CutPrefix(v, "host:"); ok {
			a = gwapiv1.GatewayStatusAddress{Type: ptr.To(gwapiv1.HostnameAddressType), Value: h}
		}
		gw.Status.Addresses = append(gw.Status.Addresses, a)
	}
	return gw
}

// TestDesiredGatewayService: a Gateway's Service is headless with its listeners' ports (one
// per port and protocol), its IP addresses in EndpointSlices by family (no loopback: the API
// server refuses it), an ExternalName when it has only a hostname, and carries the
// spec.infrastructure labels and annotations except those kubelb must not set, which are named.
func TestDesiredGatewayService(t *testing.T) {
	gw := gateway("shop", "edge", "kubelb")
	gw.UID = "gw-uid"
	gw.Spec.Listeners = append(gw.Spec.Listeners,
		gwapiv1.Listener{Name: "http-b", Protocol: gwapiv1.HTTPProtocolType, Port: 80},
		gwapiv1.Listener{Name: "https", Protocol: gwapiv1.HTTPSProtocolType, Port: 443},
		gwapiv1.Listener{Name: "dns", Protocol: gwapiv1.UDPProtocolType, Port: 53})
	gw.Spec.Infrastructure = &gwapiv1.GatewayInfrastructure{
		Labels: map[gwapiv1.LabelKey]gwapiv1.LabelValue{
			"team": "shop", "example.com/tier": "edge",
			"kubelb.k8c.io/managed-by":                 "me",    // kubelb's own
			"gateway.networking.k8s.io/gateway-name":   "other", // Kubernetes' (gateway API's) own
			"service.kubernetes.io/service-proxy-name": "none",
			"bad": "not a label value",
		},
		Annotations: map[gwapiv1.AnnotationKey]gwapiv1.AnnotationValue{
			"example.com/owner": "shop-team", "kubelb.k8c.io/request-timeout": "1s",
		},
	}
	withAddresses(gw, "192.0.2.10", "127.0.0.1", "2001:db8::1", "192.0.2.10", "host:lb.example.com")

	svc, dropped, ok := DesiredGatewayService(gw)
	if !ok {
		t.Fatal("no Service for Gateway edge")
	}
	if svc.Name != "edge-kubelb" || svc.Namespace != "shop" || svc.Spec.Type != corev1.ServiceTypeClusterIP ||
		svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Selector) != 0 {
		t.Errorf("Service %s/%s type %s clusterIP %q selector %v: want headless shop/edge-kubelb without selector",
			svc.Namespace, svc.Name, svc.Spec.Type, svc.Spec.ClusterIP, svc.Spec.Selector)
	}
	wantLabels := map[string]string{"team": "shop", "example.com/tier": "edge",
		gwapiv1.GatewayNameLabelKey: "edge", v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}
	if d := cmp.Diff(wantLabels, svc.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"example.com/owner": "shop-team"}, svc.Annotations); d != "" {
		t.Errorf("annotations (-want +got):\n%s", d)
	}
	wantDropped := []string{
		`label "bad" (not a valid value)`,
		`label "gateway.networking.k8s.io/gateway-name" (a key of kubelb's or Kubernetes' own domain)`,
		`label "kubelb.k8c.io/managed-by" (a key of kubelb's or Kubernetes' own domain)`,
		`label "service.kubernetes.io/service-proxy-name" (a key of kubelb's or Kubernetes' own domain)`,
		`annotation "kubelb.k8c.io/request-timeout" (a key of kubelb's or Kubernetes' own domain)`,
	}
	if d := cmp.Diff(wantDropped, dropped); d != "" {
		t.Errorf("dropped (-want +got):\n%s", d)
	}
	if o := svc.OwnerReferences; len(o) != 1 || o[0].Kind != "Gateway" || o[0].UID != "gw-uid" || o[0].APIVersion != "gateway.networking.k8s.io/v1" {
		t.Errorf("owner %v: want the Gateway", o)
	}
	wantPorts := []corev1.ServicePort{{Name: "udp-53", Protocol: corev1.ProtocolUDP, Port: 53},
		{Name: "tcp-80", Protocol: corev1.ProtocolTCP, Port: 80}, {Name: "tcp-443", Protocol: corev1.ProtocolTCP, Port: 443}}
	if d := cmp.Diff(wantPorts, svc.Spec.Ports); d != "" {
		t.Errorf("ports (-want +got):\n%s", d)
	}

	svc.UID = "svc-uid"
	slicesOf := DesiredGatewaySlices(gw, svc)
	got := map[string][]string{}
	for _, s := range slicesOf {
		if s.Labels[discoveryv1.LabelServiceName] != "edge-kubelb" || s.Labels[discoveryv1.LabelManagedBy] != GatewaySliceManagedBy ||
			s.OwnerReferences[0].UID != "svc-uid" || len(s.Ports) != 3 {
			t.Errorf("slice %s: labels %v owner %v ports %d", s.Name, s.Labels, s.OwnerReferences, len(s.Ports))
		}
		got[s.Name+" "+string(s.AddressType)] = s.Endpoints[0].Addresses
	}
	if d := cmp.Diff(map[string][]string{"edge-kubelb-ipv4 IPv4": {"192.0.2.10"}, "edge-kubelb-ipv6 IPv6": {"2001:db8::1"}}, got); d != "" {
		t.Errorf("slices (-want +got):\n%s", d)
	}

	// Only a hostname: an alias of it.
	host := withAddresses(gateway("shop", "edge", "kubelb"), "host:lb.example.com")
	svc, dropped, _ = DesiredGatewayService(host)
	if svc.Spec.Type != corev1.ServiceTypeExternalName || svc.Spec.ExternalName != "lb.example.com" || svc.Spec.ClusterIP != "" ||
		len(DesiredGatewaySlices(host, svc)) != 0 || dropped != nil {
		t.Errorf("hostname only: type %s externalName %q clusterIP %q dropped %v", svc.Spec.Type, svc.Spec.ExternalName, svc.Spec.ClusterIP, dropped)
	}
	// No address yet: headless, no slice (the name resolves once the hub gives one).
	none := gateway("shop", "edge", "kubelb")
	svc, _, _ = DesiredGatewayService(none)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || len(DesiredGatewaySlices(none, svc)) != 0 {
		t.Errorf("no address: clusterIP %q slices %v", svc.Spec.ClusterIP, DesiredGatewaySlices(none, svc))
	}
	// A name too long for a Service: none.
	if _, _, ok := DesiredGatewayService(gateway("shop", strings.Repeat("g", 57), "kubelb")); ok {
		t.Error("a Service for a Gateway of 57 characters (64 with -kubelb)")
	}
}

// TestInfrastructureMetadataBounds: at most 8 labels and 8 annotations (by key), annotation
// values of at most 4096 bytes; the rest named.
func TestInfrastructureMetadataBounds(t *testing.T) {
	infra := &gwapiv1.GatewayInfrastructure{Labels: map[gwapiv1.LabelKey]gwapiv1.LabelValue{},
		Annotations: map[gwapiv1.AnnotationKey]gwapiv1.AnnotationValue{"long": gwapiv1.AnnotationValue(strings.Repeat("v", 4097))}}
	for i := range 10 {
		infra.Labels[gwapiv1.LabelKey(fmt.Sprintf("l%d", i))] = "v"
	}
	labels, annotations, dropped := InfrastructureMetadata(infra)
	if len(labels) != 8 || labels["l0"] != "v" || labels["l8"] != "" || annotations != nil {
		t.Errorf("labels %v annotations %v", slices.Sorted(maps.Keys(labels)), annotations)
	}
	want := []string{`label "l8" (more than 8)`, `label "l9" (more than 8)`, `annotation "long" (not a valid value)`}
	if d := cmp.Diff(want, dropped); d != "" {
		t.Errorf("dropped (-want +got):\n%s", d)
	}
}

// gatewayService waits for the Service of a Gateway until check accepts it.
func (e *env) gatewayService(t *testing.T, gw *gwapiv1.Gateway, check func(*corev1.Service) error) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{}
	testsupport.Eventually(t, timeout, "the Service of Gateway "+gw.Name, func() error {
		if err := e.Tenant.Client.Get(e.ctx, client.ObjectKey{Namespace: gw.Namespace, Name: gw.Name + GatewayServiceSuffix}, svc); err != nil {
			return err
		}
		return check(svc)
	})
	return svc
}

// TestGatewayServiceFollowsGateway: the ccm keeps, in the namespace of a Gateway it serves,
// the Service <gateway>-kubelb that an in-cluster client resolves to the Gateway's address
// (headless, an EndpointSlice with the address the hub gave), labelled gateway-name and with
// the Gateway's spec.infrastructure labels and annotations (what it leaves out is a Warning
// Event), follows changes of both, and deletes it when the Gateway is no longer served or is
// gone. A Service of that name that is not kubelb's is left alone.
func TestGatewayServiceFollowsGateway(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "gwsvc", nil)
	gw := gateway("gwsvc", "edge", "kubelb")
	gw.Spec.Infrastructure = &gwapiv1.GatewayInfrastructure{
		Labels:      map[gwapiv1.LabelKey]gwapiv1.LabelValue{"team": "shop", "kubelb.k8c.io/tenant": "other"},
		Annotations: map[gwapiv1.AnnotationKey]gwapiv1.AnnotationValue{"example.com/owner": "shop-team"},
	}
	gw.Spec.GatewayClassName = "custom-svc"
	e.create(t, gatewayClass("custom-svc", ControllerName))
	e.create(t, gw)
	svc := e.gatewayService(t, gw, func(s *corev1.Service) error {
		if s.Labels["team"] != "shop" || s.Labels[gwapiv1.GatewayNameLabelKey] != "edge" || s.Annotations["example.com/owner"] != "shop-team" {
			return fmt.Errorf("labels %v annotations %v", s.Labels, s.Annotations)
		}
		return nil
	})
	if _, ok := svc.Labels["kubelb.k8c.io/tenant"]; ok || svc.Spec.ClusterIP != corev1.ClusterIPNone ||
		len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].UID != gw.UID {
		t.Errorf("Service labels %v clusterIP %q owners %v", svc.Labels, svc.Spec.ClusterIP, svc.OwnerReferences)
	}
	testsupport.Eventually(t, timeout, "a Warning naming the label left out", func() error {
		return e.eventFor(gw, ReasonInfrastructureDropped, "kubelb.k8c.io/tenant")
	})

	// The hub gives the Gateway its address: the Service resolves to it.
	rt := e.routeOf(t, tenantNS, gw.UID, nil)
	e.setRouteStatus(t, tenantNS, rt.Name, map[string]any{
		"addresses": []any{map[string]any{"type": "IPAddress", "value": "203.0.113.20"}},
	})
	testsupport.Eventually(t, timeout, "the EndpointSlice of the Gateway's address", func() error {
		list := &discoveryv1.EndpointSliceList{}
		if err := e.Tenant.Client.List(e.ctx, list, client.InNamespace("gwsvc"), client.MatchingLabels{discoveryv1.LabelServiceName: "edge-kubelb"}); err != nil {
			return err
		}
		if len(list.Items) != 1 || list.Items[0].AddressType != discoveryv1.AddressTypeIPv4 ||
			!slices.Equal(list.Items[0].Endpoints[0].Addresses, []string{"203.0.113.20"}) || *list.Items[0].Ports[0].Port != 80 {
			return fmt.Errorf("slices %+v", list.Items)
		}
		return nil
	})

	// A new label, a listener more: followed.
	e.getTenant(t, gw)
	gw.Spec.Infrastructure.Labels["tier"] = "edge"
	delete(gw.Spec.Infrastructure.Labels, "kubelb.k8c.io/tenant")
	gw.Spec.Listeners = append(gw.Spec.Listeners, gwapiv1.Listener{Name: "tcp", Protocol: gwapiv1.TCPProtocolType, Port: 7000})
	if err := e.Tenant.Client.Update(e.ctx, gw); err != nil {
		t.Fatal(err)
	}
	e.gatewayService(t, gw, func(s *corev1.Service) error {
		if s.Labels["tier"] != "edge" || len(s.Spec.Ports) != 2 || s.Spec.Ports[1].Port != 7000 {
			return fmt.Errorf("labels %v ports %v", s.Labels, s.Spec.Ports)
		}
		return nil
	})

	// A foreign Service of a Gateway's Service name is left alone, with a Warning.
	foreign := gateway("gwsvc", "taken", "custom-svc")
	e.create(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "gwsvc", Name: "taken-kubelb", Labels: map[string]string{"app": "mine"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}}})
	e.create(t, foreign)
	testsupport.Eventually(t, timeout, "a Warning about the foreign Service", func() error {
		return e.eventFor(foreign, ReasonGatewayServiceConflict, "taken-kubelb exists and was not made by kubelb")
	})
	mine := &corev1.Service{}
	if err := e.Tenant.Client.Get(e.ctx, client.ObjectKey{Namespace: "gwsvc", Name: "taken-kubelb"}, mine); err != nil ||
		mine.Labels[gwapiv1.GatewayNameLabelKey] != "" || mine.Spec.Ports[0].Port != 8080 {
		t.Errorf("the foreign Service was changed: %v %v", mine.Labels, mine.Spec.Ports)
	}

	// No longer served (another controller's class): the Service goes; so it does when the
	// Gateway is deleted.
	e.create(t, gatewayClass("foreign-svc", "example.com/other"))
	e.getTenant(t, gw)
	gw.Spec.GatewayClassName = "foreign-svc"
	if err := e.Tenant.Client.Update(e.ctx, gw); err != nil {
		t.Fatal(err)
	}
	e.waitGone(t, e.Tenant.Client, svc)
	e.getTenant(t, gw)
	gw.Spec.GatewayClassName = "custom-svc"
	if err := e.Tenant.Client.Update(e.ctx, gw); err != nil {
		t.Fatal(err)
	}
	svc = e.gatewayService(t, gw, func(*corev1.Service) error { return nil })
	if err := e.Tenant.Client.Delete(e.ctx, gw); err != nil {
		t.Fatal(err)
	}
	e.waitGone(t, e.Tenant.Client, svc)
}

// eventFor finds an Event about obj of reason whose note contains text.
func (e *env) eventFor(obj client.Object, reason, text string) error {
	list := &eventsv1.EventList{}
	if err := e.Tenant.Client.List(e.ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return err
	}
	for _, ev := range list.Items {
		if ev.Regarding.UID == obj.GetUID() && ev.Type == corev1.EventTypeWarning && ev.Reason == reason && strings.Contains(ev.Note, text) {
			return nil
		}
	}
	return errors.New("no such Event yet")
}
