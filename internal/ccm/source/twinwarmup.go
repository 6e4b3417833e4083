package source

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TwinWarmup bounds how long a Route waits for a new NodePort twin to list a ready endpoint
// (TwinReady): after that the Route is written anyway, and the backend may refuse connections
// until the tenant's kube-proxy serves the twin.
const TwinWarmup = 10 * time.Second

// twinWarmupPoll is how often an object whose Route waits for a twin is looked at again.
const twinWarmupPoll = 250 * time.Millisecond

// TwinReady tells whether a Route may send traffic to twin, the NodePort twin of a ClusterIP
// Service: a twin is made when a route first uses its Service, and until Kubernetes' endpointslice
// controller lists the Pods in the twin's EndpointSlices its NodePort refuses connections on
// every node (kube-proxy rejects a Service without endpoints). So a twin younger than
// TwinWarmup is ready once one of its slices (twinSlices) lists a ready endpoint, or when its
// original has none ready either (originalSlices: nothing to wait for); an older twin always is.
// A twin not created yet (no creationTimestamp: made by this reconcile) is young.
func TwinReady(twin *corev1.Service, originalSlices, twinSlices []discoveryv1.EndpointSlice, now time.Time) bool {
	return !twinYoung(twin, now) || readyEndpoints(twinSlices) || !readyEndpoints(originalSlices)
}

// twinYoung tells whether twin was made less than TwinWarmup before now, or not made yet.
func twinYoung(twin *corev1.Service, now time.Time) bool {
	created := twin.CreationTimestamp.Time
	return created.IsZero() || now.Sub(created) < TwinWarmup
}

// readyEndpoints tells whether a slice lists an endpoint that is ready (an unset ready
// condition means ready, as for kube-proxy).
func readyEndpoints(slices []discoveryv1.EndpointSlice) bool {
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if len(e.Addresses) > 0 && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
				return true
			}
		}
	}
	return false
}

// twinWarming tells whether twin, the twin of original, is young and not ready yet
// (TwinReady), reading both Services' EndpointSlices from r.Slices (the tenant API server: the
// cache leaves out the endpointslice controller's slices). Without r.Slices no twin waits.
func (r *Reconciler) twinWarming(ctx context.Context, original, twin *corev1.Service) (bool, error) {
	now := time.Now()
	if r.Slices == nil || !twinYoung(twin, now) { // nothing to read
		return false, nil
	}
	list := func(name string) ([]discoveryv1.EndpointSlice, error) {
		l := &discoveryv1.EndpointSliceList{}
		if err := r.Slices.List(ctx, l, client.InNamespace(original.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
			return nil, fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", original.Namespace, name, err)
		}
		return l.Items, nil
	}
	twinSlices, err := list(twin.Name)
	if err != nil {
		return false, err
	}
	originalSlices, err := list(original.Name)
	if err != nil {
		return false, err
	}
	return !TwinReady(twin, originalSlices, twinSlices, now), nil
}
