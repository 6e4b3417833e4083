package manager

import (
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// ManagedSelector selects what kubelb manages: objects labelled
// kubelb.k8c.io/managed-by=kubelb, plus the extra labels given.
func ManagedSelector(extra map[string]string) labels.Selector {
	set := labels.Set{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}
	for k, v := range extra {
		set[k] = v
	}
	return labels.SelectorFromSet(set)
}

// CacheByObject is the selection of the manager's own cache (ctrl.Options.Cache.ByObject):
// Secrets only when labelled kubelb.k8c.io/managed-by=kubelb. The controllers read the Secrets
// they made from caches of their own (NewLabelledCluster, narrower selectors) and any other
// Secret by name through the API reader, uncached; with this selection a read of a Secret
// through the manager's client can never make it cache every Secret of the hub either.
// (RBAC cannot select by label: the ClusterRole still lets the manager list every Secret,
// see docs/security.md.)
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Label: ManagedSelector(nil)},
	}
}

// NewLabelledCluster adds to mgr a cache of only the objects kubelb made (by label), so a
// controller can watch kinds such as Secrets or Deployments without caching every one of the
// hub. It shares the manager's client, scheme and REST mapper.
func NewLabelledCluster(mgr ctrl.Manager, name string, byObject map[client.Object]cache.ByObject) (cluster.Cluster, error) {
	cl, err := cluster.New(mgr.GetConfig(), func(o *cluster.Options) {
		o.Scheme = mgr.GetScheme()
		o.HTTPClient = mgr.GetHTTPClient()
		o.MapperProvider = func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mgr.GetRESTMapper(), nil }
		o.Logger = mgr.GetLogger().WithName(name + "-cache")
		o.Cache.ByObject = byObject
	})
	if err != nil {
		return nil, fmt.Errorf("%s: creating the cache of kubelb's objects: %w", name, err)
	}
	if err := mgr.Add(cl); err != nil {
		return nil, fmt.Errorf("%s: adding the cache of kubelb's objects: %w", name, err)
	}
	return cl, nil
}
