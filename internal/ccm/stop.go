package ccm

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// stopPoll is how often StopDeployment looks whether the ccm's pods are gone.
const stopPoll = time.Second

// StopDeployment scales the ccm's Deployment key to 0 replicas and waits until none of its
// pods is left, so that no running ccm adds a finalizer back while Release runs. A missing
// Deployment is nothing to stop. The wait ends with ctx (the caller bounds it).
func StopDeployment(ctx context.Context, c client.Client, key types.NamespacedName) error {
	log := ctrl.LoggerFrom(ctx).WithValues("deployment", key)
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, key, dep); err != nil {
		if apierrors.IsNotFound(err) {
			log.Info("no ccm Deployment to stop")
			return nil
		}
		return fmt.Errorf("getting Deployment %s: %w", key, err)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 0 {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`))
		if err := c.Patch(ctx, dep, patch); err != nil {
			return fmt.Errorf("scaling Deployment %s to 0: %w", key, err)
		}
		log.Info("scaled the ccm Deployment to 0")
	}
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return fmt.Errorf("the selector of Deployment %s: %w", key, err)
	}
	start := time.Now()
	for {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return fmt.Errorf("listing the pods of Deployment %s: %w", key, err)
		}
		if len(pods.Items) == 0 {
			log.Info("the ccm is stopped", "waited", time.Since(start).Round(time.Millisecond).String())
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the %d pods of Deployment %s to go: %w", len(pods.Items), key, ctx.Err())
		case <-time.After(stopPoll):
		}
	}
}
