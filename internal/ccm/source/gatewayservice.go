package source

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// GatewayServiceSuffix ends the name of the tenant Service the ccm keeps for each Gateway it
// serves: <gateway>-kubelb in the Gateway's namespace (the name Istio gives the Service of a
// Gateway of class kubelb), so that in-cluster clients reach the Gateway by a DNS name.
const GatewayServiceSuffix = "-kubelb"

// GatewaySliceManagedBy is the endpointslice.kubernetes.io/managed-by value of the
// EndpointSlices of Gateway Services (not SliceManagedBy: the twins' slice controller owns
// those).
const GatewaySliceManagedBy = "gateway.ccm.kubelb.k8c.io"

// Bounds of spec.infrastructure a Gateway Service carries: Gateway API's own (8 labels, 8
// annotations, values of at most 4096 bytes), which a CRD of another version may not enforce.
const (
	maxInfrastructureEntries = 8
	maxInfrastructureValue   = 4096
)

// GatewayServiceName is the name of the Service of Gateway name, and whether it is a valid
// Service name (a DNS-1035 label of at most 63 characters: Gateways of longer names get none).
func GatewayServiceName(name string) (string, bool) {
	n := name + GatewayServiceSuffix
	return n, len(validation.IsDNS1035Label(n)) == 0
}

// reservedKey tells whether a label or annotation key is of a domain whose keys steer kubelb
// or Kubernetes itself (kubelb.k8c.io, gateway.networking.k8s.io, kubernetes.io, k8s.io and
// their subdomains): a Gateway's spec.infrastructure never sets those on what kubelb makes.
func reservedKey(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, d := range []string{"kubelb.k8c.io", "kubernetes.io", "k8s.io"} {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}

// InfrastructureMetadata is what the Service of a Gateway takes of its spec.infrastructure:
// the labels and annotations whose key is valid and not reserved (reservedKey), of valid
// values (labels) or values of at most 4096 bytes (annotations), at most 8 of each (by key).
// dropped names, sorted, the keys left out and why.
func InfrastructureMetadata(infra *gwapiv1.GatewayInfrastructure) (labels, annotations map[string]string, dropped []string) {
	if infra == nil {
		return nil, nil, nil
	}
	take := func(in map[string]string, what string, validValue func(string) bool) map[string]string {
		var out map[string]string
		for _, k := range slices.Sorted(maps.Keys(in)) {
			v := in[k]
			switch {
			case len(validation.IsQualifiedName(k)) != 0:
				dropped = append(dropped, fmt.Sprintf("%s %q (not a valid key)", what, truncateName(k)))
			case reservedKey(k):
				dropped = append(dropped, fmt.Sprintf("%s %q (a key of kubelb's or Kubernetes' own domain)", what, truncateName(k)))
			case !validValue(v):
				dropped = append(dropped, fmt.Sprintf("%s %q (not a valid value)", what, truncateName(k)))
			case len(out) == maxInfrastructureEntries:
				dropped = append(dropped, fmt.Sprintf("%s %q (more than %d)", what, truncateName(k), maxInfrastructureEntries))
			default:
				if out == nil {
					out = map[string]string{}
				}
				out[k] = v
			}
		}
		return out
	}
	ls := map[string]string{}
	for k, v := range infra.Labels {
		ls[string(k)] = string(v)
	}
	as := map[string]string{}
	for k, v := range infra.Annotations {
		as[string(k)] = string(v)
	}
	labels = take(ls, "label", func(v string) bool { return len(validation.IsValidLabelValue(v)) == 0 })
	annotations = take(as, "annotation", func(v string) bool { return len(v) <= maxInfrastructureValue })
	return labels, annotations, dropped
}

// gatewayServicePorts are the ports of a Gateway's Service: one per distinct port and
// protocol of its listeners (UDP listeners UDP, every other TCP), named <protocol>-<port>,
// in order of port.
func gatewayServicePorts(gw *gwapiv1.Gateway) []corev1.ServicePort {
	var out []corev1.ServicePort
	for _, l := range gw.Spec.Listeners {
		if l.Port < 1 || l.Port > 65535 {
			continue
		}
		proto := corev1.ProtocolTCP
		if l.Protocol == gwapiv1.UDPProtocolType {
			proto = corev1.ProtocolUDP
		}
		p := corev1.ServicePort{Name: strings.ToLower(string(proto)) + "-" + fmt.Sprint(l.Port), Protocol: proto, Port: l.Port}
		if !slices.ContainsFunc(out, func(o corev1.ServicePort) bool { return o.Name == p.Name }) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.ServicePort) int {
		return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
	})
	return out
}

// gatewayAddresses are the Gateway's addresses (its status.addresses, which the ccm copies
// from the hub) an EndpointSlice can hold, by family (no loopback, link-local or unspecified
// address: the API server refuses them), and its first hostname.
func gatewayAddresses(gw *gwapiv1.Gateway) (v4, v6 []string, hostname string) {
	for _, a := range gw.Status.Addresses {
		switch {
		case a.Type == nil || *a.Type == gwapiv1.IPAddressType:
			ip, err := netip.ParseAddr(a.Value)
			if err != nil || ip.Zone() != "" || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() {
				continue
			}
			ip = ip.Unmap()
			if ip.Is4() {
				v4 = append(v4, ip.String())
			} else {
				v6 = append(v6, ip.String())
			}
		case *a.Type == gwapiv1.HostnameAddressType:
			if hostname == "" && len(validation.IsDNS1123Subdomain(a.Value)) == 0 {
				hostname = a.Value
			}
		}
	}
	slices.Sort(v4)
	slices.Sort(v6)
	return slices.Compact(v4), slices.Compact(v6), hostname
}

// DesiredGatewayService is the tenant Service of a Gateway (GatewayServiceName; ok false
// when the name is not valid): in the Gateway's namespace, owned by it, labelled
// gateway.networking.k8s.io/gateway-name and kubelb's managed-by, with the labels and
// annotations of its spec.infrastructure (InfrastructureMetadata), and the ports of its
// listeners. It has no selector: when the Gateway has IP addresses it is headless and its
// EndpointSlices (DesiredGatewaySlices) hold them, so its DNS name resolves to them; when it
// has only a hostname it is of type ExternalName, a DNS alias of that hostname.
func DesiredGatewayService(gw *gwapiv1.Gateway) (svc *corev1.Service, dropped []string, ok bool) {
	name, ok := GatewayServiceName(gw.Name)
	if !ok {
		return nil, nil, false
	}
	labels, annotations, dropped := InfrastructureMetadata(gw.Spec.Infrastructure)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[gwapiv1.GatewayNameLabelKey] = gw.Name
	labels[v1alpha1.LabelManagedBy] = v1alpha1.LabelManagedByValue
	svc = &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: gw.Namespace, Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gwapiv1.GroupVersion.String(), Kind: "Gateway",
				Name: gw.Name, UID: gw.UID, Controller: ptr.To(true)}}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone, Ports: gatewayServicePorts(gw)},
	}
	if v4, v6, host := gatewayAddresses(gw); len(v4) == 0 && len(v6) == 0 && host != "" {
		svc.Spec.Type, svc.Spec.ClusterIP, svc.Spec.ExternalName = corev1.ServiceTypeExternalName, "", host
	}
	return svc, dropped, true
}

// DesiredGatewaySlices are the EndpointSlices of a Gateway's headless Service svc (as the API
// server has it, with its UID): one per address family the Gateway has addresses of, named
// <service>-ipv4 / -ipv6, labelled kubernetes.io/service-name and managed-by
// GatewaySliceManagedBy, owned by the Service, with the Service's ports; none for an
// ExternalName Service.
func DesiredGatewaySlices(gw *gwapiv1.Gateway, svc *corev1.Service) []discoveryv1.EndpointSlice {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	v4, v6, _ := gatewayAddresses(gw)
	var out []discoveryv1.EndpointSlice
	for _, fam := range []struct {
		t     discoveryv1.AddressType
		suf   string
		addrs []string
	}{{discoveryv1.AddressTypeIPv4, "-ipv4", v4}, {discoveryv1.AddressTypeIPv6, "-ipv6", v6}} {
		if len(fam.addrs) == 0 {
			continue
		}
		s := discoveryv1.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{Name: svc.Name + fam.suf, Namespace: svc.Namespace, Labels: map[string]string{
				discoveryv1.LabelServiceName: svc.Name,
				discoveryv1.LabelManagedBy:   GatewaySliceManagedBy,
				gwapiv1.GatewayNameLabelKey:  gw.Name,
				v1alpha1.LabelManagedBy:      v1alpha1.LabelManagedByValue,
			}, OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID, Controller: ptr.To(true)}}},
			AddressType: fam.t,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: fam.addrs, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports:       []discoveryv1.EndpointPort{},
		}
		for _, p := range svc.Spec.Ports {
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Protocol: ptr.To(p.Protocol), Port: ptr.To(p.Port)})
		}
		out = append(out, s)
	}
	return out
}

// isGatewayService tells whether a tenant Service is the Service the ccm keeps for the
// Gateway named gateway in its namespace.
func isGatewayService(svc *corev1.Service, gateway string) bool {
	name, _ := GatewayServiceName(gateway)
	return svc.Name == name && svc.Labels[v1alpha1.LabelManagedBy] == v1alpha1.LabelManagedByValue &&
		svc.Labels[gwapiv1.GatewayNameLabelKey] == gateway
}

// gatewayServiceDrifted tells whether the Service as it is differs from the desired one in
// what the ccm sets: labels and annotations (exactly: spec.infrastructure may have dropped
// some), owner, type, external name, ports.
func gatewayServiceDrifted(cur, desired *corev1.Service) bool {
	if !maps.Equal(cur.Labels, desired.Labels) || !maps.Equal(cur.Annotations, desired.Annotations) ||
		!slices.ContainsFunc(cur.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == desired.OwnerReferences[0].UID }) ||
		cur.Spec.Type != desired.Spec.Type || cur.Spec.ExternalName != desired.Spec.ExternalName ||
		len(cur.Spec.Ports) != len(desired.Spec.Ports) {
		return true
	}
	for i, p := range cur.Spec.Ports {
		d := desired.Spec.Ports[i]
		if p.Name != d.Name || p.Protocol != d.Protocol || p.Port != d.Port {
			return true
		}
	}
	return false
}
