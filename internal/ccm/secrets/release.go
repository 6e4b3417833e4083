package secrets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/finalizer"
	"kubelb.dev/kubelb/internal/logging"
	"kubelb.dev/kubelb/internal/metrics"
)

// releaseRetries bounds the attempts at one Secret that keeps changing under the release.
const releaseRetries = 5

// ReleaseAll releases every tenant Secret that carries kubelb's finalizer or has a
// SyncSecret in namespace on the hub, with the controller's own release (its SyncSecrets go,
// then the finalizer), and deletes the SyncSecrets whose Secret is gone. tenant reads and
// writes the tenant directly; hub (reads from a synced hub cache with IndexHub's index)
// writes the hub; nil when the hub is unreachable: then only the finalizers go. It returns
// the Secrets released ("ns/name"); errors of single Secrets are joined.
func ReleaseAll(ctx context.Context, tenant, hub client.Client, namespace string) ([]string, error) {
	r := &Reconciler{Tenant: tenant, TenantReader: tenant, Hub: hub, Opts: Options{Namespace: namespace},
		managed: metrics.NewManagedSet(metrics.CCMManagedSecrets)}
	todo := map[types.NamespacedName]bool{}
	if hub != nil {
		list := &v1alpha1.SyncSecretList{}
		if err := hub.List(ctx, list, client.InNamespace(namespace)); err != nil {
			// The tenant side is released all the same; what stays is reported.
			logging.Warn(ctrl.LoggerFrom(ctx), "WARNING: could not list the SyncSecrets on the hub; releasing the Secrets in the tenant only", "error", err.Error())
			hub = nil
			r.Hub = nil
		}
		for i := range list.Items {
			if key, ok := originOf(&list.Items[i]); ok {
				todo[key] = true
			}
		}
	}
	secrets := &metav1.PartialObjectMetadataList{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := tenant.List(ctx, secrets); err != nil {
		return nil, fmt.Errorf("listing Secrets: %w", err)
	}
	for i := range secrets.Items {
		if controllerutil.ContainsFinalizer(&secrets.Items[i], v1alpha1.CleanupFinalizer) {
			todo[client.ObjectKeyFromObject(&secrets.Items[i])] = true
		}
	}
	var out []string
	var errs []error
	for _, key := range sortedKeys(todo) {
		ctx := ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("secret", key))
		var err error
		hubFailed := hub == nil
		for range releaseRetries {
			if !hubFailed {
				if err = r.release(ctx, key); err != nil && !apierrors.IsConflict(err) {
					// The hub failed us: the Secret is not held hostage; what stays on
					// the hub is reported.
					logging.Warn(ctrl.LoggerFrom(ctx), "WARNING: could not release the Secret on the hub; releasing it in the tenant only", "error", err.Error())
					hubFailed = true
				}
			}
			if hubFailed {
				err = r.releaseTenant(ctx, key)
			}
			if !apierrors.IsConflict(err) {
				break
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("releasing Secret %s: %w", key, err))
			continue
		}
		out = append(out, key.String())
	}
	return out, errors.Join(errs...)
}

// releaseTenant removes the finalizer from Secret key (the hub is out of reach).
func (r *Reconciler) releaseTenant(ctx context.Context, key types.NamespacedName) error {
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.Tenant.Get(ctx, key, secret); err != nil {
		return client.IgnoreNotFound(err)
	}
	if removed, err := finalizer.Remove(ctx, r.Tenant, secret, v1alpha1.CleanupFinalizer); err != nil || !removed {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("released Secret (tenant side only)")
	return nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[types.NamespacedName]bool) []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	return out
}
