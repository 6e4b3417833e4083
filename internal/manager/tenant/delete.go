package tenant

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/finalizer"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/envoyfleet"
)

// ReasonTerminating: the Tenant is being deleted and a request failed; it is retried.
const ReasonTerminating = "Terminating"

// retryWaiting is how soon a terminating Tenant looks again when no event wakes it.
const retryWaiting = 10 * time.Second

// tenantObjectKinds are the kinds a ccm mirrors whose removal the manager finishes
// (finalizers); they go before anything else of the tenant. releaseOwn marks the kinds no
// manager controller handles yet (Routes, SyncSecrets): the Tenant controller removes
// kubelb's own finalizer from them itself, so a KubeLB CE ccm that set it does not hold the
// Tenant forever. Any other finalizer is waited for.
var tenantObjectKinds = []struct {
	kind       string
	list       client.ObjectList
	obj        client.Object
	releaseOwn bool
}{
	{"LoadBalancer", &kubelbv1alpha1.LoadBalancerList{}, &kubelbv1alpha1.LoadBalancer{}, false},
	{"Route", &kubelbv1alpha1.RouteList{}, &kubelbv1alpha1.Route{}, true},
	{"SyncSecret", &kubelbv1alpha1.SyncSecretList{}, &kubelbv1alpha1.SyncSecret{}, true},
}

// maxNamedWaits bounds how many waited-for objects the Ready message names.
const maxNamedWaits = 5

// capNamed keeps the first maxNamedWaits entries and says how many more there are.
func capNamed(named []string) []string {
	if len(named) <= maxNamedWaits {
		return named
	}
	return append(slices.Clone(named[:maxNamedWaits]), fmt.Sprintf("%d more", len(named)-maxNamedWaits))
}

// foreign reports whether finalizer is someone else's to remove: not kubelb's own (which the
// LoadBalancer controller or this controller removes) nor Kubernetes' own (the garbage
// collector's foregroundDeletion and orphan, and those of the kubernetes.io and k8s.io
// domains, e.g. service.kubernetes.io/load-balancer-cleanup of the hub's load balancer
// controller), which its controllers remove as part of the deletion.
func foreign(finalizer string) bool {
	switch finalizer {
	case kubelbv1alpha1.CleanupFinalizer, metav1.FinalizerDeleteDependents, metav1.FinalizerOrphanDependents:
		return false
	}
	domain, _, ok := strings.Cut(finalizer, "/")
	if !ok {
		return true
	}
	for _, k8s := range []string{"kubernetes.io", "k8s.io"} {
		if domain == k8s || strings.HasSuffix(domain, "."+k8s) {
			return false
		}
	}
	return true
}

// foreignFinalizers returns the outcome of a deletion held by finalizers kubelb does not
// remove: it names each object and its foreign finalizers ("LoadBalancer tenant-a/x holds
// finalizer example.com/foo"), then extra (what the namespace controller reports), so that
// an admin can act; nil when no object it was given is held by a foreign finalizer. The
// outcome warns: an Event goes with the transition.
func foreignFinalizers(objs []held, extra []string) *outcome {
	var named []string
	for _, o := range objs {
		var fins []string
		for _, f := range o.finalizers {
			if foreign(f) {
				fins = append(fins, f)
			}
		}
		if len(fins) == 0 {
			continue
		}
		what := o.kind + " " + o.name
		if o.namespace != "" {
			what = fmt.Sprintf("%s %s/%s", o.kind, o.namespace, o.name)
		}
		word := "finalizer"
		if len(fins) > 1 {
			word = "finalizers"
		}
		named = append(named, fmt.Sprintf("%s holds %s %s", what, word, strings.Join(fins, ", ")))
	}
	if len(named) == 0 {
		return nil
	}
	named = append(capNamed(named), extra...)
	return &outcome{
		phase: kubelbv1alpha1.TenantPhaseTerminating, reason: ReasonForeignFinalizers, warn: true, requeueAfter: retryWaiting,
		message: fmt.Sprintf("deleting the tenant is blocked by finalizers kubelb does not remove: %s; "+
			"the controllers that set them remove them, or remove them yourself once it is safe", strings.Join(named, "; ")),
	}
}

// namespaceKinds are the kinds whose objects the Tenant controller looks at when a
// terminating tenant namespace stays: kubelb's, and those the manager makes there. A kind
// the API server does not serve, or the manager may not list, is skipped; the namespace
// controller's own report covers every kind (namespaceBlockers).
var namespaceKinds = []schema.GroupVersionKind{
	kubelbv1alpha1.GroupVersion.WithKind("LoadBalancerList"),
	kubelbv1alpha1.GroupVersion.WithKind("RouteList"),
	kubelbv1alpha1.GroupVersion.WithKind("SyncSecretList"),
	kubelbv1alpha1.GroupVersion.WithKind("AddressesList"),
	kubelbv1alpha1.GroupVersion.WithKind("TenantStateList"),
	{Version: "v1", Kind: "ServiceList"},
	{Version: "v1", Kind: "SecretList"},
	{Version: "v1", Kind: "ConfigMapList"},
	{Version: "v1", Kind: "ServiceAccountList"},
	{Version: "v1", Kind: "ResourceQuotaList"},
	{Group: "apps", Version: "v1", Kind: "DeploymentList"},
	{Group: "apps", Version: "v1", Kind: "DaemonSetList"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleList"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBindingList"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicyList"},
}

// namespaceBlockers looks at a terminating tenant namespace. blocked is the outcome when
// finalizers kubelb does not remove hold it: its own, or those of objects left in it (of
// namespaceKinds); the message adds report. report is what the namespace controller says in
// its conditions (NamespaceFinalizersRemaining, NamespaceContentRemaining), for kinds the
// Tenant controller does not look at; alone it is no alarm (content being deleted, e.g. pods
// terminating, shows there too).
func (r *Reconciler) namespaceBlockers(ctx context.Context, ns *corev1.Namespace) (blocked *outcome, report []string, err error) {
	if ns.DeletionTimestamp.IsZero() {
		return nil, nil, nil
	}
	for _, c := range ns.Status.Conditions {
		if (c.Type == corev1.NamespaceFinalizersRemaining || c.Type == corev1.NamespaceContentRemaining) &&
			c.Status == corev1.ConditionTrue && c.Message != "" {
			report = append(report, fmt.Sprintf("namespace %s: %s", ns.Name, c.Message))
		}
	}
	objs := []held{{kind: "namespace", name: ns.Name, finalizers: ns.Finalizers}}
	for _, gvk := range namespaceKinds {
		items, err := r.listMetadata(ctx, gvk, ns.Name)
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for _, it := range items {
			if len(it.Finalizers) > 0 {
				objs = append(objs, held{kind: strings.TrimSuffix(gvk.Kind, "List"), namespace: ns.Name, name: it.Name, finalizers: it.Finalizers})
			}
		}
	}
	return foreignFinalizers(objs, report), report, nil
}

func terminating(err error) (outcome, bool, error) {
	return outcome{phase: kubelbv1alpha1.TenantPhaseTerminating, reason: ReasonTerminating, message: err.Error()}, false, err
}

// reconcileDelete takes a Tenant apart in order: the ccm's access is revoked (so a running
// ccm cannot re-create what is being deleted), the tenant's LoadBalancers, Routes and
// SyncSecrets are deleted and waited for, then the Envoy fleet, the remaining RBAC, the
// kubeconfig and TenantState, then the namespace; when the namespace is gone the finalizer is
// removed. A namespace the Tenant does not control is left alone. done is true once the
// finalizer is removed.
//
// First, owner references naming the Tenant on objects tenants write, in any tenant
// namespace, are removed (releaseOwnerReferences): they are never the manager's, and would
// hold a foreground deletion; the condition's message names those objects.
func (r *Reconciler) reconcileDelete(ctx context.Context, t *kubelbv1alpha1.Tenant) (o outcome, done bool, err error) {
	released, err := r.releaseOwnerReferences(ctx, t)
	if err != nil {
		return terminating(err)
	}
	if released != "" {
		defer func() {
			if err == nil && !done {
				o.message = released + "; " + o.message
			}
		}()
	}
	nsName := hubnames.TenantNamespace(t.Name)
	ns := &corev1.Namespace{}
	if err := r.apiReader.Get(ctx, types.NamespacedName{Name: nsName}, ns); apierrors.IsNotFound(err) {
		ns = nil
	} else if err != nil {
		return terminating(fmt.Errorf("getting namespace %s: %w", nsName, err))
	}
	if ns != nil && controlledBy(ns, t) {
		if ns.DeletionTimestamp.IsZero() {
			if o, waiting, err := r.cleanupNamespace(ctx, t.Name); waiting || err != nil {
				return o, false, err
			}
			if err := r.client.Delete(ctx, ns, client.Preconditions{UID: &ns.UID}); client.IgnoreNotFound(err) != nil {
				return terminating(fmt.Errorf("deleting namespace %s: %w", nsName, err))
			}
		}
		blocked, report, err := r.namespaceBlockers(ctx, ns)
		if err != nil {
			return terminating(err)
		}
		if blocked != nil {
			return *blocked, false, nil
		}
		message := fmt.Sprintf("the tenant's objects are deleted; waiting for namespace %s to be removed", nsName)
		if len(report) > 0 {
			message += "; " + strings.Join(report, "; ")
		}
		return outcome{
			phase: kubelbv1alpha1.TenantPhaseTerminating, reason: ReasonWaitingForNamespace, requeueAfter: retryTerminating,
			message: message,
		}, false, nil
	}
	if _, err := finalizer.Remove(ctx, r.client, t, kubelbv1alpha1.CleanupFinalizer); err != nil {
		return terminating(err)
	}
	return outcome{}, true, nil
}

func controlledBy(obj metav1.Object, t *kubelbv1alpha1.Tenant) bool {
	owner := metav1.GetControllerOf(obj)
	return owner != nil && owner.UID == t.UID
}

// cleanupNamespace deletes everything kubelb made in a tenant namespace, in order. waiting is
// true while LoadBalancers, Routes or SyncSecrets still exist.
func (r *Reconciler) cleanupNamespace(ctx context.Context, tenant string) (outcome, bool, error) {
	ns := hubnames.TenantNamespace(tenant)
	// 1. Revoke the ccm's access first.
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: RoleBindingName, Namespace: ns}}
	if err := r.client.Delete(ctx, rb); client.IgnoreNotFound(err) != nil {
		return terminating(fmt.Errorf("deleting RoleBinding %s/%s: %w", ns, rb.Name, err))
	}

	// 2. The tenant's objects, and wait for their finalizers.
	var waits []held
	for _, k := range tenantObjectKinds {
		w, err := r.deleteAll(ctx, ns, k.kind, k.list, k.obj, k.releaseOwn)
		if err != nil {
			return terminating(fmt.Errorf("deleting the %ss of %s: %w", k.kind, ns, err))
		}
		waits = append(waits, w...)
	}
	if o := foreignFinalizers(waits, nil); o != nil {
		return *o, true, nil
	}
	if len(waits) > 0 {
		named := make([]string, 0, len(waits))
		for _, w := range waits {
			named = append(named, fmt.Sprintf("%s %s/%s (finalizers %s)", w.kind, w.namespace, w.name, strings.Join(w.finalizers, ", ")))
		}
		return outcome{
			phase: kubelbv1alpha1.TenantPhaseTerminating, reason: ReasonWaitingForTenantObjects, requeueAfter: retryWaiting,
			message: fmt.Sprintf("waiting for the finalizers of %s to be removed", strings.Join(capNamed(named), ", ")),
		}, true, nil
	}

	// 3. The Envoy fleet.
	if err := envoyfleet.Delete(ctx, r.client, ns); err != nil {
		return terminating(err)
	}

	// 4. Addresses, TenantState, the rest of the RBAC and the kubeconfig.
	if err := r.client.DeleteAllOf(ctx, &kubelbv1alpha1.Addresses{}, client.InNamespace(ns)); err != nil && !apierrors.IsNotFound(err) {
		return terminating(fmt.Errorf("deleting the Addresses of %s: %w", ns, err))
	}
	for _, obj := range []client.Object{
		&kubelbv1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Name: hubnames.TenantStateName, Namespace: ns}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: RoleName, Namespace: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.CCMKubeconfigSecretName, Namespace: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccountName, Namespace: ns}},
	} {
		if err := r.client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return terminating(fmt.Errorf("deleting %T %s/%s: %w", obj, ns, obj.GetName(), err))
		}
	}
	return outcome{}, false, nil
}

// held is an object that still exists because of its finalizers.
type held struct {
	kind, namespace, name string
	finalizers            []string
}

// deleteAll deletes every object of a kind in ns and returns those that still exist, with
// their finalizers. With releaseOwn it removes kubelb's own finalizer (kubelb.k8c.io/cleanup)
// from them first, and only that one. It reads uncached, metadata only, so it never waits on
// a stale cache nor proceeds on one.
func (r *Reconciler) deleteAll(ctx context.Context, ns, kind string, list client.ObjectList, obj client.Object, releaseOwn bool) ([]held, error) {
	gvk, err := r.client.GroupVersionKindFor(list)
	if err != nil {
		return nil, fmt.Errorf("finding the kind of %T: %w", list, err)
	}
	objGVK, err := r.client.GroupVersionKindFor(obj)
	if err != nil {
		return nil, fmt.Errorf("finding the kind of %T: %w", obj, err)
	}
	items, err := r.listMetadata(ctx, gvk, ns)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(items, func(o metav1.PartialObjectMetadata) bool { return o.DeletionTimestamp.IsZero() }) {
		if err := r.client.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("deleting every %s in %s: %w", kind, ns, err)
		}
		if items, err = r.listMetadata(ctx, gvk, ns); err != nil {
			return nil, err
		}
	}
	var waits []held
	for i := range items {
		o := &items[i]
		o.SetGroupVersionKind(objGVK)
		if releaseOwn {
			removed, err := finalizer.Remove(ctx, r.client, o, kubelbv1alpha1.CleanupFinalizer)
			if err != nil {
				return nil, err
			}
			if removed && len(o.Finalizers) == 0 {
				continue // gone now
			}
		}
		waits = append(waits, held{kind: kind, namespace: ns, name: o.Name, finalizers: o.Finalizers})
	}
	return waits, nil
}

// listMetadata lists the metadata of every object of a kind in ns from the API server.
func (r *Reconciler) listMetadata(ctx context.Context, listGVK schema.GroupVersionKind, ns string) ([]metav1.PartialObjectMetadata, error) {
	meta := &metav1.PartialObjectMetadataList{}
	meta.SetGroupVersionKind(listGVK)
	if err := r.apiReader.List(ctx, meta, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing %s in %s: %w", listGVK.Kind, ns, err)
	}
	return meta.Items, nil
}
