package ccm

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// indexOrigin indexes the hub cache's LoadBalancers by "<origin namespace>/<origin name>" of
// the Service they mirror, so that stale mirrors are found without scanning the namespace.
const indexOrigin = "ccm.kubelb.k8c.io/origin"

// originIndex is the index function of indexOrigin.
func originIndex(o client.Object) []string {
	lb, ok := o.(*v1alpha1.LoadBalancer)
	if !ok {
		return nil
	}
	if key, ok := originOf(lb); ok {
		return []string{key.String()}
	}
	return nil
}
