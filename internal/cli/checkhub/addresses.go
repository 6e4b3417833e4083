package checkhub

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"kubelb.dev/kubelb/internal/portalloc"
)

// DefaultPortRange is the manager's --envoy-port-range when its Deployment does not set it.
const DefaultPortRange = "10000-19999"

// providerClass is the loadBalancerClass the manager's own address provider serves, when its
// Deployment runs one (--address-provider node-ip or ipam).
func (h *hub) providerClass() (string, bool) {
	p, _ := flagValue(h.args, "address-provider")
	if p == "" || p == "none" {
		return "", false
	}
	class, _ := flagValue(h.args, "address-provider-class")
	return class, true
}

// checkAddresses: hub Services of type LoadBalancer in the tenant namespaces without an
// address, one check per loadBalancerClass they wait for, naming the classes nobody serves:
// neither the manager's address provider nor anyone who gave a Service of that class an
// address.
func (h *hub) checkAddresses(ctx context.Context) []Check {
	const name = "hub Service addresses"
	list := &corev1.ServiceList{}
	if err := h.c.List(ctx, list); err != nil {
		return []Check{readFailed(name, "Services", err)}
	}
	tenantNS := h.tenantNamespaces()
	served := map[string]bool{}
	if class, ok := h.providerClass(); ok {
		served[class] = true
	}
	waiting := map[string][]string{}
	total := 0
	for i := range list.Items {
		s := &list.Items[i]
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		class := serviceClass(s)
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			served[class] = true
		}
		if !tenantNS[s.Namespace] {
			continue
		}
		total++
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			waiting[class] = append(waiting[class], s.Namespace+"/"+s.Name)
		}
	}
	switch {
	case total == 0:
		return []Check{{Name: name, Status: Pass, Detail: "no hub Service of type LoadBalancer yet"}}
	case len(waiting) == 0:
		return []Check{{Name: name, Status: Pass, Detail: fmt.Sprintf("all %d hub Services of type LoadBalancer have an address", total)}}
	}
	classes := make([]string, 0, len(waiting))
	for c := range waiting {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	var out []Check
	for _, class := range classes {
		svcs := waiting[class]
		sort.Strings(svcs)
		shown := svcs
		if len(shown) > 3 {
			shown = append(shown[:3:3], fmt.Sprintf("and %d more", len(svcs)-3))
		}
		c := Check{Name: name, Status: Fail,
			Detail: fmt.Sprintf("%s %s waiting for an address (%s)", count(len(svcs), "hub Service"), classLabel(class), strings.Join(shown, ", "))}
		if served[class] {
			c.Hint = fmt.Sprintf("a provider serves Services %s but gave these none yet: kubectl -n %s describe service %s (its Events), and the provider's pool and logs",
				classLabel(class), strings.Split(svcs[0], "/")[0], strings.Split(svcs[0], "/")[1])
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
