package nodeip

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/textcut"
)

// HubOptions are the manager's Options (--address-provider=node-ip): the mode serves the hub
// Services kubelb made in tenant namespaces (labelled kubelb.k8c.io/managed-by=kubelb) of type
// LoadBalancer whose loadBalancerClass is class ("": those without one); each takes the
// addresses of the hub nodes of its tenant's spec.loadBalancer.nodeSet (else the Config's,
// else the default set), which nodeSetOf returns for the tenant's name
// (settings.Reader.NodeSet, from the manager's cache). Nothing a tenant wrote chooses a node
// set.
func HubOptions(nodeSetOf func(ctx context.Context, tenant string) (string, error), class string, reserved []PortRange, nat bool) Options {
	return Options{
		Name: "node-ip-hub",
		Hub:  true,
		Owns: func(svc *corev1.Service) bool {
			return svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
				hubnames.IsManaged(svc) &&
				svc.Labels[LabelNATShadowOf] == "" &&
				hubnames.IsTenantNamespace(svc.Namespace) &&
				ptr.Deref(svc.Spec.LoadBalancerClass, "") == class
		},
		NodeSet: func(ctx context.Context, svc *corev1.Service) (string, error) {
			set, err := nodeSetOf(ctx, hubnames.TenantName(svc.Namespace))
			if err != nil {
				return "", fmt.Errorf("reading the settings of the Service's tenant: %w", err)
			}
			return nodeSetValue(set, "the tenant's spec.loadBalancer.nodeSet")
		},
		Reserved: reserved,
		NAT:      nat,
		Metrics:  metrics.ManagerNodeIP,
	}
}

// StandaloneNodeSet is the node set of a Service in a standalone ccm: its
// kubelb.k8c.io/use-as-loadbalancer annotation (see NodeSetOf).
func StandaloneNodeSet(_ context.Context, svc *corev1.Service) (string, error) { return NodeSetOf(svc) }

// nodeSetValue validates a node set name ("" is the default set).
func nodeSetValue(v, what string) (string, error) {
	if v == "" {
		return DefaultNodeSet, nil
	}
	if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
		return "", fmt.Errorf("%s: %q is not a valid label value: %s", what, textcut.Cut(strings.ToValidUTF8(v, "?"), 70, textcut.Dots), strings.Join(errs, "; "))
	}
	return v, nil
}
