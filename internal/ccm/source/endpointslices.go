package source

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/ssa"
)

// SliceManagedBy is the endpointslice.kubernetes.io/managed-by value of the EndpointSlices
// the ccm keeps for the NodePort twins of Services without a selector: Kubernetes'
// endpointslice controller leaves slices of other managers alone. (A label value cannot hold a
// "/": the name follows Kubernetes' own "endpointslice-controller.k8s.io".)
const SliceManagedBy = "ccm.kubelb.k8c.io"

// endpointSliceControllerName is the managed-by value of the slices Kubernetes' endpointslice
// controller makes for Services with a selector (never mirrored, so not cached).
const endpointSliceControllerName = "endpointslice-controller.k8s.io"

// MaxMirroredSlices bounds the EndpointSlices mirrored per Service (the API server bounds
// the endpoints of each to 1000); the rest are ignored, with a Warning Event.
const MaxMirroredSlices = 16

// ReasonSlicesIgnored is the Event reason on a Service with more EndpointSlices than mirrored.
const ReasonSlicesIgnored = "EndpointSlicesNotMirrored"

// sliceHashLen is the number of hex digits of the source slice name's sha256 in a copy's name.
const sliceHashLen = 16

// TwinSliceName is the name of the copy, for a twin, of the EndpointSlice source: the twin's
// name (a DNS-1035 label of at most 63 characters), "-" and 16 hex digits of the sha256 of
// source, so at most 80 characters, a valid DNS subdomain whatever source is.
func TwinSliceName(twin, source string) string {
	sum := sha256.Sum256([]byte(source))
	return twin + "-" + hex.EncodeToString(sum[:])[:sliceHashLen]
}

// DesiredTwinSlices is what Kubernetes' endpointslice mirroring does, for a NodePort twin: the
// copies, for the twin, of the EndpointSlices of its original Service, when that Service has
// no selector (with one, Kubernetes makes the twin's slices itself; nil original or twin:
// none). sources are the slices labelled kubernetes.io/service-name: <original>; those the
// ccm made are left out; at most MaxMirroredSlices are mirrored (by name), and ignored is the
// number left over. A copy has the source's addressType, endpoints and ports, is named by
// TwinSliceName, labelled kubernetes.io/service-name: <twin>, managed-by SliceManagedBy and
// with the twin's kubelb labels, and is owned by the twin. The source's labels are not copied
// (service.kubernetes.io/headless would hide the copy from kube-proxy).
func DesiredTwinSlices(original, twin *corev1.Service, sources []discoveryv1.EndpointSlice) (out []discoveryv1.EndpointSlice, ignored int) {
	if original == nil || twin == nil || len(original.Spec.Selector) > 0 {
		return nil, 0
	}
	var src []*discoveryv1.EndpointSlice
	for i := range sources {
		s := &sources[i]
		if s.Namespace != original.Namespace || s.Labels[discoveryv1.LabelServiceName] != original.Name ||
			s.Labels[discoveryv1.LabelManagedBy] == SliceManagedBy {
			continue
		}
		src = append(src, s)
	}
	slices.SortFunc(src, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	if len(src) > MaxMirroredSlices {
		ignored = len(src) - MaxMirroredSlices
		src = src[:MaxMirroredSlices]
	}
	for _, s := range src {
		l := map[string]string{
			discoveryv1.LabelServiceName: twin.Name,
			discoveryv1.LabelManagedBy:   SliceManagedBy,
		}
		for _, k := range []string{v1alpha1.LabelManagedBy, v1alpha1.LabelOriginName, v1alpha1.LabelOriginNamespace} {
			if v, ok := twin.Labels[k]; ok {
				l[k] = v
			}
		}
		c := discoveryv1.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{Name: TwinSliceName(twin.Name, s.Name), Namespace: twin.Namespace, Labels: l,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: twin.Name, UID: twin.UID}}},
			AddressType: s.AddressType,
			Endpoints:   []discoveryv1.Endpoint{},
			Ports:       []discoveryv1.EndpointPort{},
		}
		for _, e := range s.Endpoints {
			c.Endpoints = append(c.Endpoints, *e.DeepCopy())
		}
		for _, p := range s.Ports {
			c.Ports = append(c.Ports, *p.DeepCopy())
		}
		out = append(out, c)
	}
	return out, ignored
}

// sliceDrifted tells whether a copy as it is differs from the desired one in what the ccm
// sets (labels, owner, addressType, endpoints, ports).
func sliceDrifted(cur, desired *discoveryv1.EndpointSlice) bool {
	for k, v := range desired.Labels {
		if cur.Labels[k] != v {
			return true
		}
	}
	emptyOrEqual := func(a, b any, la, lb int) bool { return (la == 0 && lb == 0) || equality.Semantic.DeepEqual(a, b) }
	return !slices.ContainsFunc(cur.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == desired.OwnerReferences[0].UID }) ||
		cur.AddressType != desired.AddressType ||
		!emptyOrEqual(cur.Endpoints, desired.Endpoints, len(cur.Endpoints), len(desired.Endpoints)) ||
		!emptyOrEqual(cur.Ports, desired.Ports, len(cur.Ports), len(desired.Ports))
}

// CacheByObject is the tenant cache's selection of EndpointSlices: all but those of
// Kubernetes' endpointslice controller (the slices of Services with a selector, by far the
// most), which the ccm never mirrors. cmd/ccm passes it to the manager's cache.
func CacheByObject() map[client.Object]cache.ByObject {
	req, err := labels.NewRequirement(discoveryv1.LabelManagedBy, selection.NotIn, []string{endpointSliceControllerName})
	if err != nil {
		panic(err) // a constant requirement
	}
	return map[client.Object]cache.ByObject{
		&discoveryv1.EndpointSlice{}: {Label: labels.NewSelector().Add(*req)},
		// BackendTLSPolicies read the key ca.crt of ConfigMaps, nothing else.
		&corev1.ConfigMap{}: {Transform: CACertOnly},
	}
}

// SliceReconciler keeps the EndpointSlices of the NodePort twins of Services without a
// selector (DesiredTwinSlices). It is keyed by twin ("ns/<name>-nodeport"), has no object of
// its own to finalize (the copies are owned by the twin and go with it) and no status: get
// the twin and its original → list the sources and the copies (tenant cache) → desired
// (pure) → apply the drifted copies under hubnames.FieldOwnerCCM, delete the stale ones.
//
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;patch;delete
type SliceReconciler struct {
	// Tenant reads from the tenant cache and writes to the tenant.
	Tenant client.Client
	// Recorder records Events on tenant Services.
	Recorder events.EventRecorder

	mu sync.Mutex
	// capped holds the twins whose original has slices left out (one Event per transition).
	capped map[types.NamespacedName]bool
}

// Reconcile brings the EndpointSlices of one twin in line with its original's.
func (r *SliceReconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	start := time.Now()
	defer func() { metrics.CCMEndpointSliceReconcile.Observe(req.Namespace, metrics.Result(err), start) }()
	defer func() { res, err = ssa.RetryConflict(res, err) }()

	twin, original, err := r.load(ctx, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, err
	}
	current := &discoveryv1.EndpointSliceList{}
	if err := r.Tenant.List(ctx, current, client.InNamespace(req.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: req.Name, discoveryv1.LabelManagedBy: SliceManagedBy}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the EndpointSlices of Service %s: %w", req, err)
	}
	var sources []discoveryv1.EndpointSlice
	if original != nil && len(original.Spec.Selector) == 0 {
		list := &discoveryv1.EndpointSliceList{}
		if err := r.Tenant.List(ctx, list, client.InNamespace(req.Namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: original.Name}); err != nil {
			return reconcile.Result{}, fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", original.Namespace, original.Name, err)
		}
		sources = list.Items
	}
	desired, ignored := DesiredTwinSlices(original, twin, sources)
	r.warnIgnored(original, req.NamespacedName, ignored)

	return reconcile.Result{}, syncSlices(ctx, r.Tenant, desired, current.Items)
}

// load reads the twin and its original Service from the tenant cache; either is nil when
// missing, being deleted, or (the twin) not made by the ccm.
func (r *SliceReconciler) load(ctx context.Context, key types.NamespacedName) (twin, original *corev1.Service, err error) {
	twin = &corev1.Service{}
	if err := r.Tenant.Get(ctx, key, twin); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("getting Service %s: %w", key, err)
	}
	if !isTwin(twin) || twin.DeletionTimestamp != nil {
		return nil, nil, nil
	}
	original = &corev1.Service{}
	okey := types.NamespacedName{Namespace: key.Namespace, Name: twin.Labels[v1alpha1.LabelOriginName]}
	if err := r.Tenant.Get(ctx, okey, original); err != nil {
		if apierrors.IsNotFound(err) {
			return twin, nil, nil
		}
		return nil, nil, fmt.Errorf("getting Service %s: %w", okey, err)
	}
	if original.DeletionTimestamp != nil {
		return twin, nil, nil
	}
	return twin, original, nil
}

// warnIgnored records a Warning Event on the original Service when it starts having more
// EndpointSlices than are mirrored.
func (r *SliceReconciler) warnIgnored(original *corev1.Service, twin types.NamespacedName, ignored int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ignored == 0 || original == nil {
		delete(r.capped, twin)
		return
	}
	if r.capped[twin] {
		return
	}
	if r.capped == nil {
		r.capped = map[types.NamespacedName]bool{}
	}
	r.capped[twin] = true
	record(r.Recorder, original, corev1.EventTypeWarning, ReasonSlicesIgnored,
		"Service %s/%s has no selector and more than %d EndpointSlices; only the first %d by name are served through kubelb, %d are ignored.",
		original.Namespace, original.Name, MaxMirroredSlices, MaxMirroredSlices, ignored)
}

// setupSlices registers the EndpointSlice controller: a twin, its original Service (a change
// of its selector), the original's EndpointSlices and the copies themselves all enqueue the
// twin.
func setupSlices(mgr ctrl.Manager, r *SliceReconciler, workers int) error {
	c := mgr.GetClient()
	twinExists := func(ctx context.Context, key types.NamespacedName) bool {
		svc := &corev1.Service{}
		return c.Get(ctx, key, svc) == nil && isTwin(svc)
	}
	// twinOf is the twin of Service ns/name when there is one.
	twinOf := func(ctx context.Context, ns, name string) []reconcile.Request {
		tn, ok := TwinName(name)
		key := types.NamespacedName{Namespace: ns, Name: tn}
		if !ok || !twinExists(ctx, key) {
			return nil
		}
		return []reconcile.Request{{NamespacedName: key}}
	}
	serviceToTwin := handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, svc *corev1.Service) []reconcile.Request {
		if isTwin(svc) {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(svc)}}
		}
		return twinOf(ctx, svc.Namespace, svc.Name)
	})
	sliceToTwin := handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, s *discoveryv1.EndpointSlice) []reconcile.Request {
		name := s.Labels[discoveryv1.LabelServiceName]
		switch {
		case name == "":
			return nil
		case s.Labels[discoveryv1.LabelManagedBy] == SliceManagedBy: // a copy: its twin repairs it
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: name}}}
		default:
			return twinOf(ctx, s.Namespace, name)
		}
	})
	return builder.ControllerManagedBy(mgr).
		Named("ccm-endpointslice").
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Service{}, serviceToTwin, twinInputChanged)).
		WatchesRawSource(source.Kind(mgr.GetCache(), &discoveryv1.EndpointSlice{}, sliceToTwin)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// syncSlices applies the desired EndpointSlices that the current ones (those the caller
// manages for one Service) lack or that drifted, and deletes the current ones no longer
// desired.
func syncSlices(ctx context.Context, c client.Client, desired, current []discoveryv1.EndpointSlice) error {
	keep := map[string]bool{}
	for i := range desired {
		d := &desired[i]
		keep[d.Name] = true
		j := slices.IndexFunc(current, func(s discoveryv1.EndpointSlice) bool { return s.Name == d.Name })
		var existing client.Object
		if j >= 0 {
			if !sliceDrifted(&current[j], d) {
				continue
			}
			existing = &current[j]
		}
		if err := ssa.Apply(ctx, c, d, existing, hubnames.FieldOwnerCCM, ""); err != nil {
			return fmt.Errorf("applying EndpointSlice %s/%s: %w", d.Namespace, d.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("applied EndpointSlice", "endpointslice", client.ObjectKeyFromObject(d))
	}
	for i := range current {
		s := &current[i]
		if keep[s.Name] || s.DeletionTimestamp != nil {
			continue
		}
		if err := c.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting EndpointSlice %s/%s: %w", s.Namespace, s.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("deleted EndpointSlice", "endpointslice", client.ObjectKeyFromObject(s))
	}
	return nil
}
