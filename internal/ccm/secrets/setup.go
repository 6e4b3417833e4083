package secrets

import (
	"context"
	"errors"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	ccmsource "kubelb.dev/kubelb/internal/ccm/source"
	"kubelb.dev/kubelb/internal/metrics"
)

// ControllerName names the controller (logs, controller-runtime's metrics).
const ControllerName = "ccm-secret"

// Setup adds the Secret synchronizer to mgr (a manager on the tenant cluster). hub is the
// management cluster, whose cache covers only opts.Namespace; hubClient writes to it (the
// ccm's counting hub client). It adds nothing when opts has nothing to mirror.
//
// Secrets are watched as metadata only (the tenant's Secrets are not all held in memory); the
// data of a Secret to mirror is read from the API server when it is reconciled.
func Setup(mgr ctrl.Manager, hub cluster.Cluster, hubClient client.Client, opts Options) error {
	if !opts.Enabled() {
		return nil
	}
	if opts.Namespace == "" {
		return errors.New("the tenant's namespace on the hub is required")
	}
	ctx := context.Background()
	if opts.Gateway {
		_, err := mgr.GetRESTMapper().RESTMapping(gwapiv1.SchemeGroupVersion.WithKind("ListenerSet").GroupKind(), gwapiv1.SchemeGroupVersion.Version)
		opts.ListenerSets = err == nil
		gvk := ccmsource.SecurityPolicyKind.GVK()
		_, err = mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		opts.SecurityPolicies = err == nil
	}
	if err := IndexHub(ctx, hub.GetFieldIndexer()); err != nil {
		return err
	}
	if err := indexTenant(ctx, mgr.GetFieldIndexer(), opts); err != nil {
		return err
	}
	r := &Reconciler{
		Tenant:       mgr.GetClient(),
		TenantReader: mgr.GetAPIReader(),
		Policies:     mgr.GetCache(),
		Hub:          hubClient,
		Recorder:     mgr.GetEventRecorder("kubelb-ccm"),
		Opts:         opts,
		managed:      metrics.NewManagedSet(metrics.CCMManagedSecrets),
	}
	b := builder.ControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Secret{}, builder.OnlyMetadata).
		WatchesRawSource(source.Kind(hub.GetCache(), &v1alpha1.SyncSecret{},
			handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, ss *v1alpha1.SyncSecret) []reconcile.Request {
				if key, ok := originOf(ss); ok {
					return []reconcile.Request{{NamespacedName: key}}
				}
				return nil
			}), mirrorChanged))
	if opts.Ingress {
		b = b.Watches(&networkingv1.Ingress{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return requests(ingressSecretIndex(o))
		}))
	}
	if opts.Gateway {
		b = b.Watches(&gwapiv1.Gateway{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return requests(gatewaySecretIndex(o))
		})).
			Watches(&gwapiv1.GatewayClass{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return r.gatewaySecrets(ctx, client.MatchingFields{indexGatewayClass: o.GetName()}, "")
			})).
			Watches(&gwapiv1.ReferenceGrant{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return append(r.gatewaySecrets(ctx, client.MatchingFields{indexGatewaySecretNS: o.GetNamespace()}, o.GetNamespace()),
					r.listenerSetSecrets(ctx, o.GetNamespace())...)
			}))
	}
	if opts.Gateway && opts.SecurityPolicies {
		b = b.Watches(ccmsource.SecurityPolicyKind.New(), handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return requests(securityPolicySecretIndex(o))
		}))
	}
	if opts.Gateway && opts.ListenerSets {
		b = b.Watches(&gwapiv1.ListenerSet{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return requests(listenerSetSecretIndex(o))
		}))
	}
	return b.Complete(r)
}

// gatewaySecrets are requests for the Secrets named by the Gateways matching fields (only those
// in namespace ns when ns is set).
func (r *Reconciler) gatewaySecrets(ctx context.Context, fields client.MatchingFields, ns string) []reconcile.Request {
	list := &gwapiv1.GatewayList{}
	if err := r.Tenant.List(ctx, list, fields); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing Gateways to requeue their Secrets")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		for _, key := range GatewaySecrets(&list.Items[i]) {
			if ns == "" || key.Namespace == ns {
				out = append(out, reconcile.Request{NamespacedName: key})
			}
		}
	}
	return out
}

// listenerSetSecrets are requests for the Secrets of namespace ns that ListenerSets name
// (none when ListenerSets are not mirrored).
func (r *Reconciler) listenerSetSecrets(ctx context.Context, ns string) []reconcile.Request {
	if !r.Opts.ListenerSets {
		return nil
	}
	list := &gwapiv1.ListenerSetList{}
	if err := r.Tenant.List(ctx, list, client.MatchingFields{indexListenerSetSecretNS: ns}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing ListenerSets to requeue their Secrets")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		for _, key := range ListenerSetSecrets(&list.Items[i]) {
			if key.Namespace == ns {
				out = append(out, reconcile.Request{NamespacedName: key})
			}
		}
	}
	return out
}

// requests turns "<namespace>/<name>" keys into requests.
func requests(keys []string) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(keys))
	for _, k := range keys {
		ns, name, ok := strings.Cut(k, "/")
		if ok {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	return out
}
