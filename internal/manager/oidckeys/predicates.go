package oidckeys

import (
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/translate"
)

// loginsChanged passes Routes of tenant namespaces created or deleted with logins, and updates
// that change the logins a Route carries or start its deletion.
func loginsChanged() predicate.Predicate {
	carries := func(o client.Object) bool {
		r, ok := o.(*kubelbv1alpha1.Route)
		return ok && hubnames.IsTenantNamespace(r.Namespace) && len(translate.OIDCLogins([]kubelbv1alpha1.Route{*r})) > 0
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return carries(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return carries(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return carries(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*kubelbv1alpha1.Route)
			n, ok2 := e.ObjectNew.(*kubelbv1alpha1.Route)
			if !ok1 || !ok2 || !hubnames.IsTenantNamespace(n.Namespace) {
				return false
			}
			return o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
				!slices.Equal(translate.OIDCLogins([]kubelbv1alpha1.Route{*o}), translate.OIDCLogins([]kubelbv1alpha1.Route{*n}))
		},
	}
}

// tenantNamespaceAppeared passes the creation (and the start-up listing) of kubelb's tenant
// namespaces, and nothing else: a namespace's later updates never change its logins.
func tenantNamespaceAppeared() predicate.Predicate {
	tenant := func(o client.Object) bool { return hubnames.IsTenantNamespace(o.GetName()) && hubnames.IsManaged(o) }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return tenant(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return tenant(e.Object) },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
	}
}
