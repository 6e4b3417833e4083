package loadbalancer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/hubservice"
)

// sweepOrphans is the port allocator's start-up sweep (portalloc.Sweep): of the hub Services
// listed for the rebuild, those made for a LoadBalancer that no longer exists, or controlled
// by a LoadBalancer UID that is not the UID of the LoadBalancer of that name (it was deleted
// and made anew), are deleted (if still the same object) and left out of the rebuild, so
// their ports are free. The manager has no finalizer on LoadBalancers: a LoadBalancer
// deleted while no manager ran leaves its hub Service behind, and this is where it goes.
//
// The LoadBalancers are listed after the Services, straight from the API server (metadata
// only): a LoadBalancer that made one of the listed Services and still exists is seen.
// Route and Ingress Services are kept as they are.
func sweepOrphans(ctx context.Context, reader client.Reader, writer client.Client, log func(string, ...any), svcs []corev1.Service) ([]corev1.Service, error) {
	uids := map[types.NamespacedName]types.UID{}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(kubelbv1alpha1.GroupVersion.WithKind("LoadBalancerList"))
	for {
		if err := reader.List(ctx, list, client.Limit(500), client.Continue(list.GetContinue())); err != nil {
			return nil, fmt.Errorf("listing LoadBalancers: %w", err)
		}
		for i := range list.Items {
			uids[types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}] = list.Items[i].UID
		}
		if list.GetContinue() == "" {
			break
		}
	}
	kept := svcs[:0:0]
	swept := 0
	for i := range svcs {
		svc := &svcs[i]
		lb, uid, ok := hubnames.LoadBalancerMadeFor(svc)
		if !ok {
			kept = append(kept, *svc)
			continue
		}
		current, exists := uids[lb]
		if exists && (uid == "" || uid == current) {
			kept = append(kept, *svc)
			continue
		}
		if err := hubservice.Delete(ctx, writer, svc); err != nil {
			return nil, err
		}
		swept++
		log("deleted the hub Service of a LoadBalancer that is gone; its listener ports are free",
			"service", svc.Namespace+"/"+svc.Name, "loadBalancer", lb.String(), "uid", string(uid))
	}
	if swept > 0 {
		log("swept orphaned hub Services", "count", swept)
	}
	return kept, nil
}
