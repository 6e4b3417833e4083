package tenant

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
)

// lbFinalizerStandIn plays the manager's LoadBalancer controller (another package, not
// needed here): it removes the cleanup finalizer of a LoadBalancer being deleted, but only
// once the test releases it, so the test can watch the Tenant wait.
type lbFinalizerStandIn struct {
	c       client.Client
	release atomic.Bool
}

func (s *lbFinalizerStandIn) setup(mgr ctrl.Manager) error {
	s.c = mgr.GetClient()
	return ctrl.NewControllerManagedBy(mgr).Named("loadbalancer-standin").For(&kubelbv1alpha1.LoadBalancer{}).Complete(s)
}

func (s *lbFinalizerStandIn) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lb := &kubelbv1alpha1.LoadBalancer{}
	if err := s.c.Get(ctx, req.NamespacedName, lb); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if lb.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(lb, kubelbv1alpha1.CleanupFinalizer) {
		return ctrl.Result{}, nil
	}
	if !s.release.Load() {
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	orig := lb.DeepCopy()
	controllerutil.RemoveFinalizer(lb, kubelbv1alpha1.CleanupFinalizer)
	return ctrl.Result{}, client.IgnoreNotFound(s.c.Patch(ctx, lb, client.MergeFrom(orig)))
}

// namespaceStandIn plays kube-controller-manager's namespace controller, which envtest does
// not run: it deletes the content of a deleted tenant namespace, waits until it is gone (an
// object with a finalizer holds the namespace, as it does in a cluster) and finalizes the
// namespace. Before that it records anything kubelb made that is still in the namespace: the
// Tenant controller must have removed it all.
type namespaceStandIn struct {
	c    client.Client
	api  client.Reader
	kube kubernetes.Interface

	mu        sync.Mutex
	leftovers []string
	seen      map[types.UID]bool
}

func (s *namespaceStandIn) setup(mgr ctrl.Manager) error {
	s.c, s.api = mgr.GetClient(), mgr.GetAPIReader()
	s.seen = map[types.UID]bool{}
	var err error
	if s.kube, err = kubernetes.NewForConfig(mgr.GetConfig()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("namespace-standin").For(&corev1.Namespace{}).Complete(s)
}

// contentKinds are the kinds the stand-in deletes and waits for.
var contentKinds = []struct {
	list client.ObjectList
	obj  client.Object
}{
	{&kubelbv1alpha1.LoadBalancerList{}, &kubelbv1alpha1.LoadBalancer{}},
	{&kubelbv1alpha1.RouteList{}, &kubelbv1alpha1.Route{}},
	{&kubelbv1alpha1.SyncSecretList{}, &kubelbv1alpha1.SyncSecret{}},
	{&kubelbv1alpha1.AddressesList{}, &kubelbv1alpha1.Addresses{}},
	{&kubelbv1alpha1.TenantStateList{}, &kubelbv1alpha1.TenantState{}},
	{&appsv1.DeploymentList{}, &appsv1.Deployment{}},
	{&appsv1.DaemonSetList{}, &appsv1.DaemonSet{}},
	{&corev1.ConfigMapList{}, &corev1.ConfigMap{}},
	{&corev1.SecretList{}, &corev1.Secret{}},
	{&corev1.ServiceAccountList{}, &corev1.ServiceAccount{}},
	{&rbacv1.RoleList{}, &rbacv1.Role{}},
	{&rbacv1.RoleBindingList{}, &rbacv1.RoleBinding{}},
}

func (s *namespaceStandIn) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := &corev1.Namespace{}
	if err := s.c.Get(ctx, req.NamespacedName, ns); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ns.DeletionTimestamp.IsZero() || !hubnames.IsTenantNamespace(ns.Name) || len(ns.Spec.Finalizers) == 0 {
		return ctrl.Result{}, nil
	}
	s.mu.Lock()
	first := !s.seen[ns.UID]
	s.seen[ns.UID] = true
	s.mu.Unlock()
	remaining := 0
	for _, k := range contentKinds {
		if err := s.api.List(ctx, k.list, client.InNamespace(ns.Name)); err != nil {
			return ctrl.Result{}, err
		}
		n := meta.LenList(k.list)
		if first && n > 0 {
			s.mu.Lock()
			s.leftovers = append(s.leftovers, fmt.Sprintf("%d %T in %s", n, k.list, ns.Name))
			s.mu.Unlock()
		}
		if n > 0 {
			remaining += n
			if err := s.c.DeleteAllOf(ctx, k.obj, client.InNamespace(ns.Name)); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if remaining > 0 {
		return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	ns.Spec.Finalizers = nil
	_, err := s.kube.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
	return ctrl.Result{}, client.IgnoreNotFound(err)
}

func (s *namespaceStandIn) left() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.leftovers...)
}
