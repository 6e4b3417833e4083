// Package oidckeys keeps the keys that sign the session cookies of each tenant's OIDC logins
// (SecurityPolicies with oidc, translate.OIDCLogins): per tenant, one Secret
// hubnames.OIDCCookieKeysSecret in the tenant namespace, labelled managed-by: kubelb, holding a
// random key of translate.OIDCCookieKeySize bytes per login (by translate.OIDCCookieKeyName).
// The tenant's ccm cannot read it (its Role grants no Secrets, tenant.CCMRules), nor can a
// tenant name a SyncSecret's Secret so (those are named by UID). A login keeps its key while a
// Route carries it, so sessions survive rebuilds and manager restarts; a login gone loses its
// key; at most translate.MaxOIDCCookieKeys keys per tenant; the Secret goes when no login is
// left, and with the namespace. The Envoy control plane reads the keys into the translation
// (translate.Input.OIDCCookieKeys).
//
// Every tenant namespace is planned once when it appears (and at the manager's start), with or
// without logins.
//
// Per tenant, leader only: collect (the tenant's Routes, the Secret, from the manager's
// cache) → plan (Desired, pure) → apply (server-side apply, skipped when unchanged; delete
// when no login is left).
package oidckeys

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/translate"
)

const controllerName = "oidckeys"

// FieldOwner is the server-side apply field owner of the cookie keys' Secrets.
const FieldOwner = "kubelb-oidckeys"

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubelb.k8c.io,resources=routes,verbs=get;list;watch

// Reconciler keeps the OIDC cookie keys of one tenant namespace (the request's Name).
type Reconciler struct {
	// client reads Routes, namespaces and kubelb's Secrets (the manager's cache holds only
	// those labelled managed-by: kubelb) and writes the Secrets.
	client client.Client
	// apiReader reads, by name and uncached, a Secret of the keys' name the cache does not
	// hold (one kubelb did not make), so that it is never taken over.
	apiReader client.Reader
	// max bounds the keys per tenant (translate.MaxOIDCCookieKeys).
	max int
}

// SetupWithManager adds the controller to mgr (it runs on the leader only).
func SetupWithManager(mgr ctrl.Manager) error {
	r := &Reconciler{client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), max: translate.MaxOIDCCookieKeys}
	toTenant := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		Watches(&kubelbv1alpha1.Route{}, toTenant, builder.WithPredicates(loginsChanged())).
		Watches(&corev1.Secret{}, toTenant, builder.WithPredicates(predicate.NewPredicateFuncs(hubnames.IsOIDCCookieKeys))).
		// Every tenant namespace once, when it appears and at start: a tenant without logins is
		// planned too (nothing to do, one read of the cache), so its reconcile series exists
		// before its first login and the dashboards show every tenant.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
		}), builder.WithPredicates(tenantNamespaceAppeared())).
		Complete(r)
}

// Reconcile makes the tenant's cookie keys what its Routes' logins need.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	result := ""
	defer metrics.ManagerOIDCKeysReconcile.ObserveDeferred(req.Name, time.Now(), &result, &err)
	defer func() { res, err = ssa.RetryConflict(res, err) }()
	tenant := req.Name
	if !hubnames.IsTenantNamespace(tenant) {
		return ctrl.Result{}, nil
	}
	ns := &corev1.Namespace{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: tenant}, ns); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // gone: its Secret goes with it
	}
	if !ns.DeletionTimestamp.IsZero() || !hubnames.IsManaged(ns) {
		return ctrl.Result{}, nil
	}
	routes := &kubelbv1alpha1.RouteList{}
	if err := r.client.List(ctx, routes, client.InNamespace(tenant)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the Routes of %s: %w", tenant, err)
	}
	live := slices.DeleteFunc(routes.Items, func(r kubelbv1alpha1.Route) bool { return !r.DeletionTimestamp.IsZero() })
	// Oldest first, as the translation meets them: when the bound is reached, the logins of
	// the oldest Routes have keys.
	slices.SortFunc(live, func(a, b kubelbv1alpha1.Route) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	current := &corev1.Secret{}
	key := types.NamespacedName{Namespace: tenant, Name: hubnames.OIDCCookieKeysSecret}
	if err := r.client.Get(ctx, key, current); apierrors.IsNotFound(err) {
		current = nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("getting Secret %s: %w", key, err)
	} else if !hubnames.IsOIDCCookieKeys(current) {
		current = nil
	}
	var have map[string][]byte
	if current != nil {
		have = current.Data
	}
	want, err := Desired(have, translate.OIDCLogins(live), r.max, rand.Reader)
	if err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case want == nil && current == nil:
		return ctrl.Result{}, nil
	case want == nil:
		if err := r.client.Delete(ctx, current, client.Preconditions{UID: &current.UID}); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("deleting Secret %s: %w", key, err)
		}
		ctrl.LoggerFrom(ctx).V(1).Info("OIDC cookie keys removed: no login left", "tenant", tenant)
		return ctrl.Result{}, nil
	case current != nil && sameKeys(current.Data, want) && current.Type == corev1.SecretTypeOpaque:
		return ctrl.Result{}, nil
	}
	if current == nil { // a Secret of that name kubelb did not make is left alone
		found := &corev1.Secret{}
		if err := r.apiReader.Get(ctx, key, found); err == nil && !hubnames.IsOIDCCookieKeys(found) {
			return ctrl.Result{}, fmt.Errorf("the Secret %s exists and was not made by kubelb: delete it so that the manager can keep the tenant's OIDC cookie keys there (the logins answer 500 until then)", key)
		} else if err == nil { // ours, not in the cache yet: plan again once it is
			return ctrl.Result{RequeueAfter: time.Second}, nil
		} else if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("getting Secret %s: %w", key, err)
		}
	}
	apply := corev1ac.Secret(key.Name, key.Namespace).
		WithLabels(hubnames.TenantLabels(hubnames.TenantName(tenant))).
		WithType(corev1.SecretTypeOpaque).
		WithData(want)
	if err := r.client.Apply(ctx, apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return ctrl.Result{}, fmt.Errorf("applying Secret %s: %w", key, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("OIDC cookie keys applied", "tenant", tenant, "keys", len(want))
	return ctrl.Result{}, nil
}

// sameKeys reports whether a and b hold the same keys with the same values.
func sameKeys(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, bytes.Equal)
}
