package nodeip

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// The 1:1 NAT shadow Services (Options.NAT, --node-ip-nat) need these rights besides the
// controller's; the charts grant them only with NAT on.
//
// +kubebuilder:rbac:groups="",resources=services,verbs=create;update;patch;delete

// ShadowName is the name of the 1:1 NAT shadow Service of a Service: <name>-kubelb-nat, or,
// when that is longer than a Service name may be (63), the name cut and a hash of it.
func ShadowName(name string) string {
	const suffix = "-kubelb-nat"
	if len(name)+len(suffix) <= 63 {
		return name + suffix
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("%s-%08x%s", name[:63-len(suffix)-9], h.Sum32(), suffix)
}

// shadowFor is the NAT shadow of svc: a ClusterIP Service with the private addresses as
// externalIPs, svc's selector and ports, so that kube-proxy matches the traffic a 1:1 NAT
// delivers to a node's private address.
func shadowFor(svc *corev1.Service, private []netip.Addr) *corev1.Service {
	sh := &corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Name: ShadowName(svc.Name), Namespace: svc.Namespace,
		Labels: map[string]string{
			kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue,
			LabelNATShadowOf:              svc.Name,
		},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
	}}
	sh.Spec.Type = corev1.ServiceTypeClusterIP
	sh.Spec.Selector = svc.Spec.Selector
	for _, p := range svc.Spec.Ports {
		sh.Spec.Ports = append(sh.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, TargetPort: p.TargetPort})
	}
	for _, ip := range private {
		sh.Spec.ExternalIPs = append(sh.Spec.ExternalIPs, ip.String())
	}
	return sh
}

// keepShadow creates or updates the NAT shadow of svc (existing: the shadow found by label).
// A Service of that name kubelb did not make is never written: svc gets a Warning Event. A
// shadow the API server refuses (invalid, or forbidden by admission) gives svc a Warning Event
// and refused true (the caller tries again later); it is not a reconcile error.
func (r *Reconciler) keepShadow(ctx context.Context, svc *corev1.Service, private []netip.Addr, existing *corev1.Service, all []corev1.Service) (refused bool, err error) {
	want := shadowFor(svc, private)
	if existing == nil {
		for i := range all {
			if all[i].Namespace == want.Namespace && all[i].Name == want.Name {
				r.reportNAT(svc, ReasonNATServiceNameTaken, fmt.Sprintf(
					"The Service %s, which kubelb did not make, has the name of this Service's 1:1 NAT shadow; it is left alone, so traffic arriving on the nodes' private addresses is not matched. Rename or delete it.",
					want.Name))
				return false, nil
			}
		}
		if err := r.Client.Create(ctx, want); err != nil {
			if r.refused(svc, want, err) {
				return true, nil
			}
			return false, client.IgnoreAlreadyExists(fmt.Errorf("creating NAT shadow Service %s/%s: %w", want.Namespace, want.Name, err))
		}
		r.reportNAT(svc, "", "")
		ctrl.LoggerFrom(ctx).Info("created NAT shadow Service", "service", client.ObjectKeyFromObject(want), "externalIPs", want.Spec.ExternalIPs)
		return false, nil
	}
	if existing.Name == want.Name && equality.Semantic.DeepEqual(existing.Spec.Selector, want.Spec.Selector) &&
		slices.Equal(existing.Spec.ExternalIPs, want.Spec.ExternalIPs) && samePorts(existing.Spec.Ports, want.Spec.Ports) &&
		equality.Semantic.DeepEqual(existing.OwnerReferences, want.OwnerReferences) {
		r.reportNAT(svc, "", "")
		return false, nil
	}
	if existing.Name != want.Name {
		// A shadow under another name (its Service was renamed? never: names are fixed) —
		// delete it; the next pass creates the right one.
		return false, client.IgnoreNotFound(r.Client.Delete(ctx, existing))
	}
	update := existing.DeepCopy()
	update.Labels, update.OwnerReferences = want.Labels, want.OwnerReferences
	update.Spec.Selector, update.Spec.ExternalIPs = want.Spec.Selector, want.Spec.ExternalIPs
	update.Spec.Ports = want.Spec.Ports
	if err := r.Client.Update(ctx, update); err != nil {
		if r.refused(svc, want, err) {
			return true, nil
		}
		return false, fmt.Errorf("updating NAT shadow Service %s/%s: %w", update.Namespace, update.Name, err)
	}
	r.reportNAT(svc, "", "")
	return false, nil
}

// refused tells whether err is the API server refusing the shadow (invalid, or forbidden by
// admission) and reports it on svc.
func (r *Reconciler) refused(svc, shadow *corev1.Service, err error) bool {
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		return false
	}
	r.reportNAT(svc, ReasonNATServiceRejected, fmt.Sprintf(
		"The API server refused this Service's 1:1 NAT shadow Service %s (externalIPs %s): %v. Traffic arriving on the nodes' private addresses is not matched until it is allowed (an admission policy such as DenyServiceExternalIPs may refuse externalIPs); kubelb tries again every %s.",
		shadow.Name, strings.Join(shadow.Spec.ExternalIPs, ", "), err, natRetry))
	return true
}

// samePorts compares the ports a shadow sets (name, protocol, port, targetPort).
func samePorts(a, b []corev1.ServicePort) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.ServicePort) bool {
		return x.Name == y.Name && x.Protocol == y.Protocol && x.Port == y.Port && x.TargetPort == y.TargetPort
	})
}

// reportNAT records a Warning Event on svc once per change of its NAT shadow problem (reason
// and note); an empty reason means there is none.
func (r *Reconciler) reportNAT(svc *corev1.Service, reason, note string) {
	r.natWarnings.Report(r.Recorder, svc, reason, note)
}
