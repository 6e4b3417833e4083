// Package hubcache holds what the manager caches of the hub and how: label selectors so that
// only kubelb's objects are cached, transforms that drop what no controller reads, and
// labelled caches of their own for kinds such as Secrets and Deployments.
package hubcache

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
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
//
// The kinds a tenant writes are cached as the manager needs them, not as the tenant wrote
// them (TransformTenantObject, TransformSyncSecret): their memory is bounded by the tenant's
// limits (spec.limits), not by what the API server accepts.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Secret{}:               {Label: ManagedSelector(nil)},
		&kubelbv1alpha1.SyncSecret{}:   {Transform: TransformSyncSecret},
		&kubelbv1alpha1.LoadBalancer{}: {Transform: TransformTenantObject},
		&kubelbv1alpha1.Route{}:        {Transform: TransformTenantObject},
		&kubelbv1alpha1.Addresses{}:    {Transform: TransformTenantObject},
	}
}

// AnnotationCachedDataBytes is set, in the manager's cache only, on each SyncSecret whose
// data TransformSyncSecret dropped: the bytes its data and stringData take (keys and values,
// stringData winning as in Data). It is never written to the API server.
const AnnotationCachedDataBytes = "kubelb.k8c.io/cached-data-bytes"

// kubelbLabelPrefix prefixes the labels of kubelb's contract (origin labels, managed-by).
const kubelbLabelPrefix = "kubelb.k8c.io/"

// CurrentFieldOwners are the field managers that write the objects of a tenant namespace
// today, each by server-side apply: the ccm (their spec, "kubelb-ccm"), the manager's status
// writer (the status of LoadBalancers and Routes, "kubelb-status") and its SyncSecret
// controller (theirs, "kubelb-syncsecret"). TestCurrentFieldOwners checks them against the
// FieldOwner constants of those packages.
var CurrentFieldOwners = []string{hubnames.FieldOwnerCCM, hubnames.FieldOwnerStatus, hubnames.FieldOwnerSyncSecret}

// TransformTenantObject strips from an object a tenant wrote what the manager never reads
// and the tenant controls the size of: kubectl's last-applied-configuration annotation (a
// second copy of the object), and its managedFields when they hold only applies of
// CurrentFieldOwners (stripManagedFields).
func TransformTenantObject(obj any) (any, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return obj, nil
	}
	stripManagedFields(o)
	if a := o.GetAnnotations(); a != nil {
		if _, has := a[corev1.LastAppliedConfigAnnotation]; has {
			delete(a, corev1.LastAppliedConfigAnnotation)
			if len(a) == 0 {
				a = nil
			}
			o.SetAnnotations(a)
		}
	}
	return o, nil
}

// stripManagedFields drops o's managedFields (about as large as the object's spec and status
// together) when every entry is a server-side apply of one of CurrentFieldOwners. The
// manager reads the managedFields of a cached tenant object only to find entries of other
// writers: updates of earlier versions, which ssa.ApplyStatus hands over (rewriting the whole
// list from the cached object, so no entry may be missing from it), and applies of the status
// writer's former field owners, which the status writer releases. When there is such an
// entry the whole list stays; when there is none, those readers find nothing in either.
func stripManagedFields(o client.Object) {
	mf := o.GetManagedFields()
	if len(mf) == 0 {
		return
	}
	for _, e := range mf {
		if e.Operation != metav1.ManagedFieldsOperationApply || !slices.Contains(CurrentFieldOwners, e.Manager) {
			return
		}
	}
	o.SetManagedFields(nil)
}

// TransformSyncSecret caches a SyncSecret without its data: the SyncSecret controller reads
// the data by name from the API server when it copies it into a Secret, one SyncSecret at a
// time, so the cache holds no tenant's secrets however many it writes. What the data takes
// is kept as AnnotationCachedDataBytes (the tenant's spec.limits.syncSecretBytes counts it);
// the SyncSecret's other annotations and its labels other than kubelb.k8c.io/ ones, which
// nothing reads, are dropped with it.
func TransformSyncSecret(obj any) (any, error) {
	ss, ok := obj.(*kubelbv1alpha1.SyncSecret)
	if !ok {
		return obj, nil
	}
	ss.Annotations = map[string]string{AnnotationCachedDataBytes: strconv.FormatInt(SyncSecretDataBytes(ss), 10)}
	for k := range ss.Labels {
		if !strings.HasPrefix(k, kubelbLabelPrefix) {
			delete(ss.Labels, k)
		}
	}
	ss.Data, ss.StringData = nil, nil
	stripManagedFields(ss)
	return ss, nil
}

// SyncSecretDataBytes is what a SyncSecret's data takes (keys and values of data merged with
// stringData, stringData winning, as the API server merges a Secret's). On a SyncSecret read
// from the manager's cache, it is AnnotationCachedDataBytes.
func SyncSecretDataBytes(ss *kubelbv1alpha1.SyncSecret) int64 {
	if ss.Data == nil && ss.StringData == nil {
		if v, ok := ss.Annotations[AnnotationCachedDataBytes]; ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	var n int64
	for k, v := range ss.Data {
		if _, over := ss.StringData[k]; !over {
			n += int64(len(k) + len(v))
		}
	}
	for k, v := range ss.StringData {
		n += int64(len(k) + len(v))
	}
	return n
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
