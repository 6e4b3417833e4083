package checkhub

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/portalloc"
)

// DefaultPortRange is the manager's --envoy-port-range when its Deployment does not set it.
const DefaultPortRange = "10000-19999"

// knownProviders are load balancer implementations recognised by their CRD on the hub, each
// serving Services without a loadBalancerClass in its default setup.
var knownProviders = []struct{ crd, name string }{
	{"ipaddresspools.metallb.io", "MetalLB"},
	{"ciliumloadbalancerippools.cilium.io", "Cilium's LB IPAM"},
}

// servers says who serves each loadBalancerClass: the manager's address provider, a known
// provider whose CRD is installed, or whoever gave a Service of that class an address.
func (h *hub) servers(ctx context.Context, services []corev1.Service) map[string]string {
	out := map[string]string{}
	for _, p := range knownProviders {
		if err := h.c.Get(ctx, client.ObjectKey{Name: p.crd}, &apiextensionsv1.CustomResourceDefinition{}); err == nil {
			out[""] = p.name + " (its CRD " + p.crd + " is installed)"
		}
	}
	for i := range services {
		s := &services[i]
		if _, ok := out[serviceClass(s)]; !ok && s.Spec.Type == corev1.ServiceTypeLoadBalancer && len(s.Status.LoadBalancer.Ingress) > 0 {
			out[serviceClass(s)] = "whoever gave " + s.Namespace + "/" + s.Name + " its address"
		}
	}
	if p, _ := flagValue(h.args, "address-provider"); p != "" && p != "none" {
		class, _ := flagValue(h.args, "address-provider-class")
		out[class] = "the manager's --address-provider=" + p
	}
	return out
}

// checkAddresses: hub Services of type LoadBalancer in the tenant namespaces without an
// address, one check per loadBalancerClass they wait for, naming who should serve that class
// (servers) or saying that nobody does.
func (h *hub) checkAddresses(ctx context.Context) []Check {
	const name = "hub Service addresses"
	list := &corev1.ServiceList{}
	if err := h.c.List(ctx, list); err != nil {
		return []Check{readFailed(name, "Services", err)}
	}
	tenantNS := h.tenantNamespaces()
	waiting := map[string][]string{}
	total := 0
	for i := range list.Items {
		s := &list.Items[i]
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer || !tenantNS[s.Namespace] {
			continue
		}
		total++
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			waiting[serviceClass(s)] = append(waiting[serviceClass(s)], s.Namespace+"/"+s.Name)
		}
	}
	switch {
	case total == 0:
		return []Check{{Name: name, Status: Pass, Detail: "no hub Service of type LoadBalancer yet"}}
	case len(waiting) == 0:
		return []Check{{Name: name, Status: Pass, Detail: fmt.Sprintf("all %d hub Services of type LoadBalancer have an address", total)}}
	}
	served := h.servers(ctx, list.Items)
	var out []Check
	for _, class := range slices.Sorted(maps.Keys(waiting)) {
		svcs := waiting[class]
		sort.Strings(svcs)
		shown := svcs
		if len(shown) > 3 {
			shown = append(shown[:3:3], fmt.Sprintf("and %d more", len(svcs)-3))
		}
		c := Check{Name: name, Status: Fail,
			Detail: fmt.Sprintf("%s %s waiting for an address (%s)", count(len(svcs), "hub Service"), classLabel(class), strings.Join(shown, ", "))}
		if who, ok := served[class]; ok {
			ns, svc, _ := strings.Cut(svcs[0], "/")
			c.Detail += "; served by " + who
			c.Hint = fmt.Sprintf("it gave these none yet: kubectl -n %s describe service %s (its Events), and the provider's address pool and logs", ns, svc)
		} else {
			c.Detail += "; nobody serves Services " + classLabel(class)
			c.Hint = "run a load balancer for them on the hub (MetalLB, a cloud's, or the manager's --address-provider with --address-provider-class=" + class +
				"), or set spec.loadBalancer.class on the Config or Tenant to a class the hub serves (docs/modes.md)"
		}
		out = append(out, c)
	}
	return out
}

// checkPorts: listener ports left in the manager's --envoy-port-range, that is the range
// minus the target ports of the hub Services in the tenant namespaces (the allocator's own
// record of what it gave out).
func (h *hub) checkPorts(ctx context.Context) Check {
	const name = "listener ports"
	spec, ok := flagValue(h.args, "envoy-port-range")
	if !ok {
		spec = DefaultPortRange
	}
	r, err := portalloc.ParseRange(spec)
	if err == nil {
		err = r.Validate()
	}
	if err != nil {
		return Check{Name: name, Status: Fail, Detail: "the manager's --envoy-port-range: " + err.Error(), Hint: "fix the flag (chart value envoy.portRange)"}
	}
	list := &corev1.ServiceList{}
	if err := h.c.List(ctx, list); err != nil {
		return readFailed(name, "Services", err)
	}
	tenantNS := h.tenantNamespaces()
	used := map[int32]bool{}
	for _, s := range list.Items {
		if !tenantNS[s.Namespace] {
			continue
		}
		for _, p := range s.Spec.Ports {
			if port := int32(p.TargetPort.IntValue()); port != 0 && r.Contains(port) {
				used[port] = true
			}
		}
	}
	left := r.Size() - len(used)
	detail := fmt.Sprintf("%d of %d left in %s", left, r.Size(), r)
	if left == 0 {
		return Check{Name: name, Status: Fail, Detail: detail,
			Hint: "new LoadBalancer ports and listeners get none: widen the manager's --envoy-port-range (chart value envoy.portRange)"}
	}
	if left*10 < r.Size() {
		return Check{Name: name, Status: Warn, Detail: detail, Hint: "fewer than 10% left: widen the manager's --envoy-port-range (chart value envoy.portRange)"}
	}
	return Check{Name: name, Status: Pass, Detail: detail}
}

// count is "1 thing" or "n things".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
