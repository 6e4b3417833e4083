// Package hubservice holds what every hub Service the manager makes goes through, whoever
// makes it (LoadBalancers, Gateways, the shared Ingress Service): its NodePorts, its apply and
// its deletion.
package hubservice

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
)

// NodePorts makes a hub Service of type LoadBalancer being applied (spec, its ports
// already set) follow the tenant's spec.loadBalancer.allocateNodePorts (allocate, from
// settings.Tenant.AllocateNodePorts): it sets allocateLoadBalancerNodePorts, and when
// NodePorts are not to be allocated, every port of spec that still has a NodePort in
// existing (the hub Service as it is, nil when there is none; the same port and protocol) is
// applied with nodePort 0. The API server keeps NodePorts allocated before the switch was
// turned off, and nobody owns them: only asking for 0 gives them back. When allocate is true
// the ports carry no nodePort, and the API server allocates them. The hub Services of
// LoadBalancers and of Routes (Gateways, the shared Ingress Service) all go through it.
func NodePorts(spec *corev1ac.ServiceSpecApplyConfiguration, allocate bool, existing *corev1.Service) {
	spec.WithAllocateLoadBalancerNodePorts(allocate)
	if allocate || existing == nil {
		return
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if existingNodePort(existing, ptr.Deref(p.Port, 0), kubelbv1alpha1.ProtocolOrTCP(ptr.Deref(p.Protocol, ""))) != 0 {
			p.WithNodePort(0)
		}
	}
}

// existingNodePort is the NodePort svc has for the port (number and protocol, the keys of a
// Service's ports); 0 when it has none.
func existingNodePort(svc *corev1.Service, port int32, protocol corev1.Protocol) int32 {
	for _, sp := range svc.Spec.Ports {
		if sp.Port == port && kubelbv1alpha1.ProtocolOrTCP(sp.Protocol) == protocol {
			return sp.NodePort
		}
	}
	return 0
}

// Apply applies desired, a hub Service, with server-side apply as owner (a field manager),
// unless the fields owner holds in existing (the hub Service as it is, nil when there is
// none) already match. Two changes the API server refuses make the Service anew: another
// load balancer class while it stays of type LoadBalancer (the field is immutable then), and
// another primary IP family (ipFamilies[0]); existing is deleted, and the Service is applied
// again once its deletion is seen (its delete event requeues the caller). A type change is
// an apply: the API server drops the NodePorts, the class and the other fields of the old
// type. svc is existing, or nil when there was none or it was deleted: the status the caller
// reports of it (the address) did not change. A Service the API server refused (invalid,
// forbidden, or an internal error such as a full NodePort range) is returned as rejected, to
// report on the object and retry; other errors as err.
func Apply(ctx context.Context, c client.Client, owner string, existing *corev1.Service, desired *corev1ac.ServiceApplyConfiguration) (svc *corev1.Service, rejected, err error) {
	if existing != nil {
		if existing.Spec.Type == corev1.ServiceTypeLoadBalancer && ptr.Deref(desired.Spec.Type, "") == corev1.ServiceTypeLoadBalancer &&
			!equality.Semantic.DeepEqual(existing.Spec.LoadBalancerClass, desired.Spec.LoadBalancerClass) {
			return nil, nil, Delete(ctx, c, existing)
		}
		if primaryFamilyChanged(existing, desired) {
			return nil, nil, Delete(ctx, c, existing)
		}
		current, err := corev1ac.ExtractService(existing, owner)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the fields of hub Service %s/%s: %w", existing.Namespace, existing.Name, err)
		}
		if equality.Semantic.DeepEqual(current, desired) {
			return existing, nil, nil
		}
	}
	if err := c.Apply(ctx, desired, client.FieldOwner(owner), client.ForceOwnership); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsInternalError(err) {
			return existing, err, nil
		}
		return nil, nil, fmt.Errorf("applying hub Service %s/%s: %w", ptr.Deref(desired.Namespace, ""), ptr.Deref(desired.Name, ""), err)
	}
	return existing, nil, nil
}

// primaryFamilyChanged reports whether desired asks for another primary IP family than
// existing has (the tenant Service was made anew with another one, or a ccm that mirrors the
// families replaced one that did not): the API server refuses that change.
func primaryFamilyChanged(existing *corev1.Service, desired *corev1ac.ServiceApplyConfiguration) bool {
	if desired.Spec == nil || len(desired.Spec.IPFamilies) == 0 || len(existing.Spec.IPFamilies) == 0 {
		return false
	}
	return desired.Spec.IPFamilies[0] != existing.Spec.IPFamilies[0]
}

// Delete deletes a hub Service the manager made, only if it is still the same
// object (its UID); nil, a Service already gone or replaced is nothing to do.
func Delete(ctx context.Context, c client.Client, svc *corev1.Service) error {
	if svc == nil {
		return nil
	}
	err := c.Delete(ctx, svc, client.Preconditions{UID: &svc.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting hub Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

// MarkExhausted records on the hub Service svc the ports the hub's listener port range had no
// listener port for (v1alpha1.AnnotationPortsExhausted), so that the translation tells them
// from ports not allocated yet; nothing when there are none.
func MarkExhausted(svc *corev1ac.ServiceApplyConfiguration, missing []hubnames.ServicePortRef) {
	if len(missing) == 0 {
		return
	}
	svc.WithAnnotations(map[string]string{kubelbv1alpha1.AnnotationPortsExhausted: hubnames.FormatExhausted(missing)})
}
