package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/logging"
	"kubelb.dev/kubelb/internal/metrics"
)

// IsTwin tells whether a tenant Service is a NodePort twin the ccm made.
func IsTwin(svc *corev1.Service) bool { return isTwin(svc) }

// ReleaseResult is what ReleaseAll did.
type ReleaseResult struct {
	// Released are the tenant objects ("Kind ns/name") that had a hub Route or kubelb's
	// finalizer and were released.
	Released []string
	// RoutesOfGone counts the hub Routes whose tenant object no longer exists, deleted.
	RoutesOfGone int
	// Twins are the NodePort twins ("ns/name") deleted.
	Twins []string
	// HubErrors are the failures on the hub alone (the tenant side was released).
	HubErrors []string
}

// releaseRetries bounds the attempts at one object that keeps changing under the release.
const releaseRetries = 5

// ReleaseAll releases every Ingress and Gateway API object of the kinds the ccm's options o
// enable and the tenant serves (mapper) with the controllers' own release: its hub Route goes, the status the ccm copied
// and the finalizer of earlier versions go; then the hub Routes whose object is gone, and
// every NodePort twin left. tenant reads and writes the tenant directly; hub (a client whose
// reads come from a synced hub cache with IndexHub's indexes) writes the tenant's namespace
// on the hub; nil when the hub is unreachable: then only the tenant side is released (the
// status only where it is surely kubelb's: route parents of kubelb's controller). Errors of
// single objects are joined; the others are still released.
func ReleaseAll(ctx context.Context, tenant, hub client.Client, mapper meta.RESTMapper, namespace string, o Options) (ReleaseResult, error) {
	var res ReleaseResult
	var errs []error
	before, err := listTwins(ctx, tenant)
	if err != nil {
		return res, err
	}
	twins := newTwinRefs()
	existing := map[string]bool{} // originKey of every tenant object seen
	for _, k := range Kinds {
		if k.Name == Ingress.Name && !o.Ingress || k.GatewayAPI() && !o.GatewayAPI || o.Disabled[k.Name] {
			continue // not the ccm's (nor in its RBAC): as its controllers, the release leaves it
		}
		if _, err := mapper.RESTMapping(k.GroupVersionKind().GroupKind(), k.GroupVersionKind().Version); err != nil {
			continue // the tenant does not serve the kind: nothing of it to release
		}
		r := &Reconciler{Kind: k, Tenant: tenant, Hub: hub, Namespace: namespace, twins: twins,
			managed: metrics.NewManagedSet(k.Managed)}
		list := k.NewList()
		if err := tenant.List(ctx, list); err != nil {
			errs = append(errs, fmt.Errorf("listing %s: %w", k.String(), err))
			continue
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return res, fmt.Errorf("reading the list of %s: %w", k.String(), err)
		}
		for _, item := range items {
			obj := item.(client.Object)
			key := client.ObjectKeyFromObject(obj)
			existing[originKey(k.OriginKind(), key)] = true
			released, err := r.releaseOne(ctx, obj)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if released {
				res.Released = append(res.Released, k.String()+" "+key.String())
			}
		}
	}
	if hub != nil {
		n, err := releaseRoutesOfGone(ctx, tenant, hub, namespace, twins, existing)
		res.RoutesOfGone = n
		if err != nil {
			res.HubErrors = append(res.HubErrors, err.Error())
		}
	}
	// The per-object release deleted the twins only its object used; the rest goes now.
	if err := deleteAllTwins(ctx, tenant); err != nil {
		errs = append(errs, err)
	}
	after, err := listTwins(ctx, tenant)
	if err != nil {
		errs = append(errs, err)
	}
	for _, svc := range before {
		key := client.ObjectKeyFromObject(&svc)
		if !slices.ContainsFunc(after, func(s corev1.Service) bool { return s.UID == svc.UID && s.DeletionTimestamp == nil }) {
			res.Twins = append(res.Twins, key.String())
		}
	}
	sort.Strings(res.Twins)
	return res, errors.Join(errs...)
}

// releaseOne releases one object (hub and tenant side, or the tenant side only when r.Hub is
// nil), again on a conflict with the object as it is now. It tells whether the object had
// something of kubelb's (a Route or the finalizer).
func (r *Reconciler) releaseOne(ctx context.Context, obj client.Object) (bool, error) {
	key := client.ObjectKeyFromObject(obj)
	log := ctrl.LoggerFrom(ctx).WithValues("kind", r.Kind.String(), "object", key)
	ctx = ctrl.LoggerInto(ctx, log)
	had := controllerutil.ContainsFinalizer(obj, v1alpha1.CleanupFinalizer)
	if r.Hub != nil {
		if current, err := r.currentRoute(ctx, obj.GetUID()); err == nil {
			had = had || current != nil
		}
	}
	var err error
	hubFailed := r.Hub == nil
	for range releaseRetries {
		var u map[string]any
		if u, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return false, fmt.Errorf("encoding %s %s: %w", r.Kind.String(), key, err)
		}
		if !hubFailed {
			if err = r.release(ctx, obj, u); err != nil && !apierrors.IsConflict(err) {
				// The hub failed us: the object is not held hostage; what stays on the
				// hub is reported.
				logging.Warn(log, "WARNING: could not release the object on the hub; releasing it in the tenant only", "error", err.Error())
				hubFailed = true
			}
		}
		if hubFailed {
			err = r.releaseTenant(ctx, obj, u, nil)
		}
		if !apierrors.IsConflict(err) {
			break
		}
		obj = r.Kind.New()
		if err := r.Tenant.Get(ctx, key, obj); err != nil {
			return false, client.IgnoreNotFound(err)
		}
	}
	if err != nil {
		return false, fmt.Errorf("releasing %s %s: %w", r.Kind.String(), key, err)
	}
	if had {
		log.Info("released")
	}
	return had, nil
}

// releaseRoutesOfGone deletes the hub Routes whose tenant object is not in existing (by
// originKey), with the twins only they used.
func releaseRoutesOfGone(ctx context.Context, tenant, hub client.Client, namespace string, twins *twinRefs, existing map[string]bool) (int, error) {
	routes := &v1alpha1.RouteList{}
	if err := hub.List(ctx, routes, client.InNamespace(namespace)); err != nil {
		return 0, fmt.Errorf("listing hub Routes in %s: %w", namespace, err)
	}
	byKind := map[string]Kind{}
	for _, k := range Kinds {
		byKind[k.OriginKind()] = k
	}
	done := map[string]bool{}
	n := 0
	var errs []error
	for i := range routes.Items {
		kind, key, ok := routeOrigin(&routes.Items[i])
		k, known := byKind[kind]
		if !ok || !known || existing[originKey(kind, key)] || done[originKey(kind, key)] {
			continue
		}
		done[originKey(kind, key)] = true
		r := &Reconciler{Kind: k, Tenant: tenant, Hub: hub, Namespace: namespace, twins: twins}
		if err := r.deleteRoutes(ctx, nil, key, ""); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// listTwins lists the NodePort twins the ccm made in the tenant.
func listTwins(ctx context.Context, tenant client.Client) ([]corev1.Service, error) {
	list := &corev1.ServiceList{}
	if err := tenant.List(ctx, list, client.HasLabels{v1alpha1.LabelManagedBy, v1alpha1.LabelOriginName}); err != nil {
		return nil, fmt.Errorf("listing NodePort Services: %w", err)
	}
	return slices.DeleteFunc(list.Items, func(s corev1.Service) bool { return !isTwin(&s) }), nil
}

// deleteAllTwins deletes every NodePort twin the ccm made in the tenant.
func deleteAllTwins(ctx context.Context, tenant client.Client) error {
	twins, err := listTwins(ctx, tenant)
	if err != nil {
		return err
	}
	var errs []error
	for i := range twins {
		svc := &twins[i]
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		if err := tenant.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting NodePort Service %s: %w", key, err))
			continue
		}
		ctrl.LoggerFrom(ctx).Info("deleted NodePort Service", "service", key)
	}
	return errors.Join(errs...)
}
