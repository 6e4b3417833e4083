package framework

import (
	"context"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/testenv"
)

// PlayKubeProxy plays kube-proxy on the tenant's nodes for TCP: every NodePort of every
// Service listens on each node address and forwards each connection to one of the Service's
// ready endpoints (round robin), read from the EndpointSlices kube-controller-manager
// maintains. It follows Services and EndpointSlices until the test ends.
func PlayKubeProxy(t testenv.TB, c client.Client, nodeIPs []string) {
	fs := forwarders{}
	t.Cleanup(fs.closeAll)
	log := newOnceLogger(t)
	Every(t, PlayInterval, func(ctx context.Context) bool {
		if want, err := nodePortTargets(ctx, c, nodeIPs); err == nil {
			for _, err := range fs.sync(want) {
				log.Logf("kube-proxy: %v", err)
			}
		}
		return false
	})
}

// nodePortTargets maps node-address:NodePort to the ready endpoints behind it.
func nodePortTargets(ctx context.Context, c client.Client, nodeIPs []string) (map[string][]string, error) {
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs); err != nil {
		return nil, err
	}
	var slices discoveryv1.EndpointSliceList
	if err := c.List(ctx, &slices); err != nil {
		return nil, err
	}
	byService := map[string][]*discoveryv1.EndpointSlice{}
	for i := range slices.Items {
		s := &slices.Items[i]
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		key := s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
		byService[key] = append(byService[key], s)
	}
	want := map[string][]string{}
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		for _, p := range svc.Spec.Ports {
			if p.NodePort == 0 || p.Protocol != corev1.ProtocolTCP {
				continue
			}
			var ups []string
			for _, s := range byService[svc.Namespace+"/"+svc.Name] {
				for _, sp := range s.Ports {
					if sp.Port == nil || (sp.Name != nil && *sp.Name != p.Name) || (sp.Name == nil && p.Name != "") {
						continue
					}
					for _, ep := range s.Endpoints {
						if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
							continue
						}
						for _, a := range ep.Addresses {
							ups = append(ups, net.JoinHostPort(a, fmt.Sprint(*sp.Port)))
						}
					}
				}
			}
			for _, ip := range nodeIPs {
				want[net.JoinHostPort(ip, fmt.Sprint(p.NodePort))] = ups
			}
		}
	}
	return want, nil
}
