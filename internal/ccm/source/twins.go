package source

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// originKey is the indexRouteOrigin value of the object key of a kind.
func originKey(originKind string, key types.NamespacedName) string {
	return originKind + "/" + key.Namespace + "/" + key.Name
}

// routeOrigin returns the tenant object a hub Route mirrors, from its labels.
func routeOrigin(rt *v1alpha1.Route) (kind string, key types.NamespacedName, ok bool) {
	l := rt.GetLabels()
	kind, ns, name := l[v1alpha1.LabelOriginResourceKind], l[v1alpha1.LabelOriginNamespace], l[v1alpha1.LabelOriginName]
	if kind == "" || ns == "" || name == "" {
		return "", types.NamespacedName{}, false
	}
	return kind, types.NamespacedName{Namespace: ns, Name: name}, true
}

// twinRefs remembers which tenant objects (by UID) use which NodePort twins, for the life of
// the process; with the hub Routes (which embed the twins they use) it tells whether a twin
// is still needed. Its lock also serialises a twin's deletion with its use.
type twinRefs struct {
	mu    sync.Mutex
	byUID map[types.UID]sets.Set[types.NamespacedName]
}

func newTwinRefs() *twinRefs {
	return &twinRefs{byUID: map[types.UID]sets.Set[types.NamespacedName]{}}
}

// use records that object uid uses twins (in addition to what it used).
func (t *twinRefs) use(uid types.UID, twins []types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(twins) == 0 {
		return
	}
	if t.byUID[uid] == nil {
		t.byUID[uid] = sets.New[types.NamespacedName]()
	}
	t.byUID[uid].Insert(twins...)
}

// replace records that object uid uses exactly keep and returns what it used before besides.
func (t *twinRefs) replace(uid types.UID, keep []types.NamespacedName) sets.Set[types.NamespacedName] {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.byUID[uid]
	if len(keep) == 0 {
		delete(t.byUID, uid)
	} else {
		t.byUID[uid] = sets.New(keep...)
	}
	if old == nil {
		return sets.New[types.NamespacedName]()
	}
	return old.Delete(keep...)
}

// usedByOther tells whether an object other than uid uses twin; call with mu held.
func (t *twinRefs) usedByOther(twin types.NamespacedName, uid types.UID) bool {
	for u, s := range t.byUID {
		if u != uid && s.Has(twin) {
			return true
		}
	}
	return false
}

// collectTwins records that object uid now uses exactly keep, and deletes the twins it (or its
// Route, route; may be nil) used before that nothing else uses: no other object seen by this
// process, no other hub Route.
func (r *Reconciler) collectTwins(ctx context.Context, uid types.UID, route *v1alpha1.Route, keep []types.NamespacedName) error {
	candidates := r.twins.replace(uid, keep)
	if route != nil && route.Spec.Source.Kubernetes != nil {
		for i := range route.Spec.Source.Kubernetes.Services {
			s := &route.Spec.Source.Kubernetes.Services[i].Service
			if isTwin(s) && !slices.Contains(keep, client.ObjectKeyFromObject(s)) {
				candidates.Insert(client.ObjectKeyFromObject(s))
			}
		}
	}
	list := candidates.UnsortedList()
	slices.SortFunc(list, func(a, b types.NamespacedName) int { return cmp.Compare(a.String(), b.String()) })
	for _, twin := range list {
		if err := r.deleteTwinIfUnused(ctx, twin, uid); err != nil {
			return err
		}
	}
	return nil
}

// deleteTwinIfUnused deletes a twin no object but uid uses.
func (r *Reconciler) deleteTwinIfUnused(ctx context.Context, twin types.NamespacedName, uid types.UID) error {
	r.twins.mu.Lock()
	defer r.twins.mu.Unlock()
	if r.twins.usedByOther(twin, uid) {
		return nil
	}
	routes := &v1alpha1.RouteList{}
	if err := r.Hub.List(ctx, routes, client.InNamespace(r.Namespace), client.MatchingFields{indexRouteServices: twin.String()}); err != nil {
		return fmt.Errorf("listing Routes using Service %s: %w", twin, err)
	}
	for _, rt := range routes.Items {
		if rt.Name != string(uid) && rt.DeletionTimestamp == nil {
			return nil
		}
	}
	svc := &corev1.Service{}
	if err := r.Tenant.Get(ctx, twin, svc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !isTwin(svc) || svc.DeletionTimestamp != nil {
		return nil
	}
	if err := r.Tenant.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting NodePort Service %s: %w", twin, err)
	}
	ctrl.LoggerFrom(ctx).Info("deleted NodePort Service", "service", twin)
	return nil
}
