package tenant

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/fairqueue"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/textcut"
)

// ReasonForeignOwnerReferences is the reason of the Warning Event on a Tenant being deleted
// when objects a tenant writes named it as their owner (an ownerReference, which with
// blockOwnerDeletion holds a foreground deletion for as long as they exist): the manager
// removed those references; the Event and the Tenant's Ready message name the objects.
const ReasonForeignOwnerReferences = "ForeignOwnerReferences"

// tenantWrittenKinds are the kinds a tenant's ccm writes (the tenant Role): an owner
// reference on them is the tenant's, never the manager's, which sets none there.
var tenantWrittenKinds = []schema.GroupVersionKind{
	kubelbv1alpha1.GroupVersion.WithKind("LoadBalancerList"),
	kubelbv1alpha1.GroupVersion.WithKind("RouteList"),
	kubelbv1alpha1.GroupVersion.WithKind("SyncSecretList"),
	kubelbv1alpha1.GroupVersion.WithKind("AddressesList"),
}

// namesTenant reports whether ref names Tenant t (by UID, which is what the garbage
// collector follows, or by kind and name) or its namespace (nsUID: the namespace is a
// dependent of the Tenant, so holding it holds the Tenant).
func namesTenant(ref metav1.OwnerReference, t *kubelbv1alpha1.Tenant, nsUID types.UID) bool {
	if ref.UID == t.UID || (nsUID != "" && ref.UID == nsUID) {
		return true
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == kubelbv1alpha1.GroupVersion.Group && ref.Kind == "Tenant" && ref.Name == t.Name
}

// releaseOwnerReferences removes, from the objects of every tenant namespace that a tenant
// writes (tenantWrittenKinds), the owner references that name the deleting Tenant t or the
// namespace it controls: the
// manager sets none there, and with blockOwnerDeletion (and any finalizer) such an object
// would hold the Tenant's foreground deletion for ever, and with it the Tenant's name. It
// returns a sentence naming the objects it released ("" when none) and emits it as a Warning
// Event on the Tenant. It reads uncached, metadata only.
func (r *Reconciler) releaseOwnerReferences(ctx context.Context, t *kubelbv1alpha1.Tenant) (string, error) {
	var nsUID types.UID
	ns := &corev1.Namespace{}
	if err := r.apiReader.Get(ctx, types.NamespacedName{Name: hubnames.TenantNamespace(t.Name)}, ns); err == nil && controlledBy(ns, t) {
		nsUID = ns.UID
	} else if client.IgnoreNotFound(err) != nil {
		return "", fmt.Errorf("getting namespace %s: %w", hubnames.TenantNamespace(t.Name), err)
	}
	var released []string
	var first runtime.Object // the first object released (the Event's related object)
	for _, gvk := range tenantWrittenKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk)
		if err := r.apiReader.List(ctx, list); err != nil {
			return "", fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		kind := strings.TrimSuffix(gvk.Kind, "List")
		for i := range list.Items {
			o := &list.Items[i]
			if !hubnames.IsTenantNamespace(o.Namespace) ||
				!slices.ContainsFunc(o.OwnerReferences, func(ref metav1.OwnerReference) bool { return namesTenant(ref, t, nsUID) }) {
				continue
			}
			o.SetGroupVersionKind(gvk.GroupVersion().WithKind(kind))
			orig := o.DeepCopy()
			o.OwnerReferences = slices.DeleteFunc(o.OwnerReferences, func(ref metav1.OwnerReference) bool { return namesTenant(ref, t, nsUID) })
			if err := r.client.Patch(ctx, o, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
				return "", fmt.Errorf("removing the owner reference to Tenant %s from %s %s/%s: %w", t.Name, kind, o.Namespace, o.Name, err)
			}
			released = append(released, fmt.Sprintf("%s %s/%s", kind, o.Namespace, o.Name))
			if first == nil {
				first = o
			}
		}
	}
	if len(released) == 0 {
		return "", nil
	}
	slices.Sort(released)
	message := fmt.Sprintf("%s named this Tenant or its namespace as owner, which would hold its deletion; the manager removed those owner references",
		strings.Join(capNamed(released), ", "))
	// The Event names an object it released as related: the recorder folds Events of one
	// object, reason and action (and related object) into one series that keeps the first
	// note, so a second pass releasing other objects would not be told otherwise.
	r.recorder.Eventf(t, first, corev1.EventTypeWarning, ReasonForeignOwnerReferences, "Delete", "%s", textcut.Cut(message, maxEventNote, textcut.Dots))
	return message, nil
}

// ReasonOwnerReferenceRemoved is the reason of the Warning Event on a tenant's object whose
// owner reference to a Tenant or a namespace the manager removed.
const ReasonOwnerReferenceRemoved = "OwnerReferenceRemoved"

// foreignOwner reports whether an owner reference of an object in a tenant namespace names
// something cluster-scoped that kubelb owns or makes: a Tenant, or a namespace. The manager
// sets no owner reference on the objects tenants write, and one of these, with
// blockOwnerDeletion, would hold that Tenant's (or namespace's) foreground deletion.
func foreignOwner(ref metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	return (gv.Group == kubelbv1alpha1.GroupVersion.Group && ref.Kind == "Tenant") || (gv.Group == "" && ref.Kind == "Namespace")
}

// ownerReferences removes foreignOwner references from the objects of one kind a tenant
// writes, as soon as they are written, and tells the tenant with a Warning Event on the
// object. (The Tenant controller also removes those naming a Tenant being deleted, in case
// one is written in between: releaseOwnerReferences.)
type ownerReferences struct {
	client   client.Client
	recorder events.EventRecorder
	kind     string
	newObj   func() client.Object
}

// setupOwnerReferences adds an ownerReferences controller per kind a tenant writes.
func setupOwnerReferences(mgr ctrl.Manager, recorder events.EventRecorder) error {
	for _, k := range []ownerReferences{
		{kind: "LoadBalancer", newObj: func() client.Object { return &kubelbv1alpha1.LoadBalancer{} }},
		{kind: "Route", newObj: func() client.Object { return &kubelbv1alpha1.Route{} }},
		{kind: "SyncSecret", newObj: func() client.Object { return &kubelbv1alpha1.SyncSecret{} }},
		{kind: "Addresses", newObj: func() client.Object { return &kubelbv1alpha1.Addresses{} }},
	} {
		r := &ownerReferences{client: mgr.GetClient(), recorder: recorder, kind: k.kind, newObj: k.newObj}
		err := ctrl.NewControllerManagedBy(mgr).
			Named("ownerrefs-"+strings.ToLower(k.kind)).
			For(k.newObj(), builder.WithPredicates(predicate.NewPredicateFuncs(hasForeignOwner))).
			WithOptions(controller.Options{MaxConcurrentReconciles: 1, NewQueue: fairqueue.New}).
			Complete(r)
		if err != nil {
			return fmt.Errorf("setting up the owner references controller of %ss: %w", k.kind, err)
		}
	}
	return nil
}

// Reconcile removes the foreignOwner references of one object (get → patch → Event); a
// conflict is retried quietly.
func (r *ownerReferences) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	defer func() { res, err = ssa.RetryConflict(res, err) }()
	obj := r.newObj()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	refs := obj.GetOwnerReferences()
	if !hubnames.IsTenantNamespace(obj.GetNamespace()) || !slices.ContainsFunc(refs, foreignOwner) {
		return ctrl.Result{}, nil
	}
	var named []string
	for _, ref := range refs {
		if foreignOwner(ref) {
			named = append(named, ref.Kind+" "+ref.Name)
		}
	}
	orig := obj.DeepCopyObject().(client.Object)
	obj.SetOwnerReferences(slices.DeleteFunc(slices.Clone(refs), foreignOwner))
	if err := r.client.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonOwnerReferenceRemoved, "Reconcile",
		"%s", textcut.Cut(fmt.Sprintf("the owner reference to %s was removed: an object in a tenant namespace may not name a Tenant or a namespace as its owner", strings.Join(named, ", ")), maxEventNote, textcut.Dots))
	return ctrl.Result{}, nil
}
