package secrets

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	ccmsource "kubelb.dev/kubelb/internal/ccm/source"
	"kubelb.dev/kubelb/internal/finalizer"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

// ActionSync is the action of the Events this controller records.
const ActionSync = "SyncSecret"

// Options configure the Secret synchronizer.
type Options struct {
	// Namespace is the tenant's namespace on the hub.
	Namespace string
	// Ingress mirrors the Secrets served Ingresses name (not --disable-ingress-controller).
	Ingress bool
	// UseIngressClass limits that to Ingresses of class kubelb (--use-ingress-class).
	UseIngressClass bool
	// Gateway mirrors the Secrets served Gateways name (--enable-gateway-api).
	Gateway bool
	// UseGatewayClass: see source.GatewayServed (--use-gateway-class).
	UseGatewayClass bool
	// ListenerSets also mirrors the Secrets named by the ListenerSets of served Gateways
	// (with Gateway; Setup sets it when the tenant serves ListenerSets).
	ListenerSets bool
	// Labelled mirrors every Secret labelled kubelb.k8c.io/managed-by=kubelb
	// (--enable-secret-synchronizer).
	Labelled bool
	// SecurityPolicies also mirrors the key .htpasswd of the Secrets that Envoy Gateway's
	// SecurityPolicies name in basicAuth.users (with Gateway; Setup sets it when the tenant
	// serves SecurityPolicies).
	SecurityPolicies bool
}

// Enabled tells whether the synchronizer has anything to do.
func (o Options) Enabled() bool { return o.Ingress || o.Gateway || o.Labelled }

// Reconciler mirrors one tenant Secret (the request) into a SyncSecret, or removes its mirror.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;listenersets;gatewayclasses;referencegrants,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
type Reconciler struct {
	// Tenant reads from the tenant cache (Secrets as metadata only) and writes to the tenant.
	Tenant client.Client
	// TenantReader reads Secrets from the tenant API server (their data is not cached).
	TenantReader client.Reader
	// Policies reads Envoy Gateway's SecurityPolicies (unstructured) from the tenant cache,
	// which the client reads from the API server.
	Policies client.Reader
	// Hub reads from the hub cache and writes to the hub.
	Hub      client.Client
	Recorder events.EventRecorder
	Opts     Options

	managed *metrics.ManagedSet
	// warned remembers the last problem reported per Secret UID, so that a Warning is
	// recorded once per problem, not once per reconcile.
	warned sync.Map
	// created remembers when a mirror was created (Secret UID → time), so that a reconcile
	// racing the hub cache does not create it again.
	created sync.Map
}

// createdGrace is how long a SyncSecret the ccm just created may be missing from the hub
// cache before the ccm applies it again.
const createdGrace = 5 * time.Second

// Reconcile has the ccm's controller shape (docs/development.md): get the Secret (gone →
// remove its mirrors), release it when it is being deleted or no longer wanted, load the scope
// (its data from the tenant, the mirror from the hub cache), compute the desired SyncSecret
// (pure), ensure the finalizer and apply the mirror when it drifted.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	result := ""
	defer metrics.CCMSecretReconcile.ObserveDeferred(req.Namespace, time.Now(), &result, &err)
	defer func() { res, err = ssa.RetryConflict(res, err) }()

	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.Tenant.Get(ctx, req.NamespacedName, meta); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("getting Secret %s: %w", req.NamespacedName, err)
		}
		r.managed.Set(req.NamespacedName, false)
		return reconcile.Result{}, r.deleteMirrors(ctx, req.NamespacedName, "")
	}
	wanted, onlyKeys, err := r.wanted(ctx, meta)
	if err != nil {
		return reconcile.Result{}, err
	}
	hasFinalizer := controllerutil.ContainsFinalizer(meta, v1alpha1.CleanupFinalizer)
	if !wanted || meta.DeletionTimestamp != nil {
		if !hasFinalizer && !r.hasMirror(ctx, req.NamespacedName) {
			result = metrics.ResultSkipped
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, r.release(ctx, req.NamespacedName)
	}

	// Scope: the Secret's data (from the API server) and its mirror (hub cache).
	secret := &corev1.Secret{}
	if err := r.TenantReader.Get(ctx, req.NamespacedName, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil // its delete event brings us back
		}
		return reconcile.Result{}, fmt.Errorf("reading Secret %s: %w", req.NamespacedName, err)
	}
	if onlyKeys != nil { // only what the hub needs of it
		secret.Data = pick(secret.Data, onlyKeys)
	}
	if reason, msg := Check(secret); reason != "" {
		r.warn(secret, reason, msg)
		return reconcile.Result{}, r.release(ctx, req.NamespacedName)
	}
	r.warned.Delete(secret.UID)
	// A Secret re-created under the same name has a new UID: its old mirror goes.
	if err := r.deleteMirrors(ctx, req.NamespacedName, secret.UID); err != nil {
		return reconcile.Result{}, err
	}
	current, err := r.currentMirror(ctx, string(secret.UID))
	if err != nil {
		return reconcile.Result{}, err
	}
	desired := DesiredSyncSecret(secret, r.Opts.Namespace)

	if _, err := finalizer.Ensure(ctx, r.Tenant, secret, v1alpha1.CleanupFinalizer); err != nil {
		return reconcile.Result{}, err
	}
	if current != nil && current.DeletionTimestamp != nil {
		return reconcile.Result{}, nil // its delete event brings us back to create it anew
	}
	if current != nil {
		r.created.Delete(secret.UID)
	} else if at, ok := r.created.Load(secret.UID); ok && time.Since(at.(time.Time)) < createdGrace {
		// Created a moment ago; the hub cache has not seen it yet. Its create event brings us
		// back; the requeue covers a mirror deleted before the cache saw it.
		r.managed.Set(req.NamespacedName, true)
		return reconcile.Result{RequeueAfter: createdGrace}, nil
	}
	if drifted(current, desired) {
		var existing client.Object
		if current != nil {
			existing = current
		}
		if err := ssa.Apply(ctx, r.Hub, desired, existing, hubnames.FieldOwnerCCM, ""); err != nil {
			r.warn(secret, ReasonSyncFailed, "Mirroring the Secret to the management cluster: "+err.Error())
			return reconcile.Result{}, fmt.Errorf("applying SyncSecret %s/%s for Secret %s: %w", r.Opts.Namespace, desired.Name, req.NamespacedName, err)
		}
		if current == nil {
			r.created.Store(secret.UID, time.Now())
		}
		ctrl.LoggerFrom(ctx).Info("applied SyncSecret", "syncSecret", client.ObjectKeyFromObject(desired))
	}
	r.managed.Set(req.NamespacedName, true)
	return reconcile.Result{}, nil
}

// ReasonSyncFailed is the reason of the Warning recorded when the hub refuses the SyncSecret.
const ReasonSyncFailed = "SecretSyncFailed"

// warn records a Warning Event on the Secret once per problem.
func (r *Reconciler) warn(s *corev1.Secret, reason, msg string) {
	key := reason + "/" + msg
	if prev, ok := r.warned.Load(s.UID); ok && prev.(string) == key {
		return
	}
	r.warned.Store(s.UID, key)
	r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, reason, ActionSync, "%s", msg)
}

// wanted tells whether the hub needs Secret meta, and which of its keys (nil: all): all when
// it is labelled (with the synchronizer on), a served Ingress or Gateway names it, or a
// SecurityPolicy's apiKeyAuth does; only the users' key when only basic authentications name
// it (wantedBySecurityPolicies).
func (r *Reconciler) wanted(ctx context.Context, meta *metav1.PartialObjectMetadata) (bool, []string, error) {
	whole, err := r.wantedWhole(ctx, meta)
	if err != nil || whole {
		return whole, nil, err
	}
	return r.wantedBySecurityPolicies(ctx, client.ObjectKeyFromObject(meta))
}

// wantedBySecurityPolicies tells whether SecurityPolicies of Secret key's namespace need it,
// and which of its keys (nil: all): all when an apiKeyAuth names it (each key a client), else
// .htpasswd when a basicAuth.users does and client-secret when an oidc.clientSecret does.
func (r *Reconciler) wantedBySecurityPolicies(ctx context.Context, key types.NamespacedName) (bool, []string, error) {
	if !r.Opts.Gateway || !r.Opts.SecurityPolicies {
		return false, nil, nil
	}
	list := ccmsource.SecurityPolicyKind.NewList()
	if err := r.Policies.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingFields{indexSecurityPolicySecret: key.String()}); err != nil {
		return false, nil, fmt.Errorf("listing SecurityPolicies naming Secret %s: %w", key, err)
	}
	var keys []string
	for i := range list.Items {
		p := &list.Items[i]
		if p.GetDeletionTimestamp() != nil {
			continue
		}
		if slices.Contains(ccmsource.APIKeySecretNames(p), key.Name) {
			return true, nil, nil
		}
		if ccmsource.BasicAuthSecretName(p) == key.Name && !slices.Contains(keys, trafficpolicy.HtpasswdKey) {
			keys = append(keys, trafficpolicy.HtpasswdKey)
		}
		if ccmsource.OIDCClientSecretName(p) == key.Name && !slices.Contains(keys, trafficpolicy.OIDCClientSecretKey) {
			keys = append(keys, trafficpolicy.OIDCClientSecretKey)
		}
	}
	slices.Sort(keys)
	return keys != nil, keys, nil
}

// pick is data with only the keys named.
func pick(data map[string][]byte, keys []string) map[string][]byte {
	out := map[string][]byte{}
	for _, k := range keys {
		if v, ok := data[k]; ok {
			out[k] = v
		}
	}
	return out
}

// wantedWhole tells whether the hub needs the whole of Secret meta: it is labelled (with the
// synchronizer on), or a served Ingress or Gateway names it.
func (r *Reconciler) wantedWhole(ctx context.Context, meta *metav1.PartialObjectMetadata) (bool, error) {
	if r.Opts.Labelled && hubnames.IsManaged(meta) {
		return true, nil
	}
	key := client.ObjectKeyFromObject(meta)
	if r.Opts.Ingress {
		list := &networkingv1.IngressList{}
		if err := r.Tenant.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingFields{indexIngressSecret: key.String()}); err != nil {
			return false, fmt.Errorf("listing Ingresses naming Secret %s: %w", key, err)
		}
		for i := range list.Items {
			if ccmsource.IngressServed(&list.Items[i], r.Opts.UseIngressClass) {
				return true, nil
			}
		}
	}
	if r.Opts.Gateway {
		list := &gwapiv1.GatewayList{}
		if err := r.Tenant.List(ctx, list, client.MatchingFields{indexGatewaySecret: key.String()}); err != nil {
			return false, fmt.Errorf("listing Gateways naming Secret %s: %w", key, err)
		}
		var grants *gwapiv1.ReferenceGrantList
		for i := range list.Items {
			gw := &list.Items[i]
			class, err := r.gatewayClass(ctx, gw)
			if err != nil {
				return false, err
			}
			if !ccmsource.GatewayServed(gw, class, r.Opts.UseGatewayClass) {
				continue
			}
			if gw.Namespace != key.Namespace && grants == nil {
				grants = &gwapiv1.ReferenceGrantList{}
				if err := r.Tenant.List(ctx, grants, client.InNamespace(key.Namespace)); err != nil {
					return false, fmt.Errorf("listing ReferenceGrants of namespace %s: %w", key.Namespace, err)
				}
			}
			var items []gwapiv1.ReferenceGrant
			if grants != nil {
				items = grants.Items
			}
			if SecretGranted(gw.Namespace, key, items) {
				return true, nil
			}
		}
	}
	if r.Opts.Gateway && r.Opts.ListenerSets {
		return r.wantedByListenerSet(ctx, key)
	}
	return false, nil
}

// wantedByListenerSet tells whether a ListenerSet whose Gateway is served names Secret key
// (in another namespace, with a ReferenceGrant from ListenerSets there). Whether the Gateway
// takes the ListenerSet is the hub's decision.
func (r *Reconciler) wantedByListenerSet(ctx context.Context, key types.NamespacedName) (bool, error) {
	list := &gwapiv1.ListenerSetList{}
	if err := r.Tenant.List(ctx, list, client.MatchingFields{indexListenerSetSecret: key.String()}); err != nil {
		return false, fmt.Errorf("listing ListenerSets naming Secret %s: %w", key, err)
	}
	var grants []gwapiv1.ReferenceGrant
	listed := false
	for i := range list.Items {
		ls := &list.Items[i]
		if ls.Namespace != key.Namespace && !listed {
			gl := &gwapiv1.ReferenceGrantList{}
			if err := r.Tenant.List(ctx, gl, client.InNamespace(key.Namespace)); err != nil {
				return false, fmt.Errorf("listing ReferenceGrants of namespace %s: %w", key.Namespace, err)
			}
			grants, listed = gl.Items, true
		}
		if !SecretGrantedFrom("ListenerSet", ls.Namespace, key, grants) {
			continue
		}
		ref := ls.Spec.ParentRef
		if (ref.Group != nil && *ref.Group != gwapiv1.GroupName) || (ref.Kind != nil && *ref.Kind != "Gateway") {
			continue
		}
		gwKey := client.ObjectKey{Namespace: ls.Namespace, Name: string(ref.Name)}
		if ref.Namespace != nil && *ref.Namespace != "" {
			gwKey.Namespace = string(*ref.Namespace)
		}
		gw := &gwapiv1.Gateway{}
		if err := r.Tenant.Get(ctx, gwKey, gw); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, fmt.Errorf("getting Gateway %s: %w", gwKey, err)
		}
		class, err := r.gatewayClass(ctx, gw)
		if err != nil {
			return false, err
		}
		if ccmsource.GatewayServed(gw, class, r.Opts.UseGatewayClass) {
			return true, nil
		}
	}
	return false, nil
}

// gatewayClass returns the GatewayClass of a Gateway from the cache, nil when there is none.
func (r *Reconciler) gatewayClass(ctx context.Context, gw *gwapiv1.Gateway) (*gwapiv1.GatewayClass, error) {
	if gw.Spec.GatewayClassName == "" {
		return nil, nil
	}
	class := &gwapiv1.GatewayClass{}
	if err := r.Tenant.Get(ctx, client.ObjectKey{Name: string(gw.Spec.GatewayClassName)}, class); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting GatewayClass %s: %w", gw.Spec.GatewayClassName, err)
	}
	return class, nil
}

// currentMirror reads the SyncSecret of that name from the hub cache (nil: none).
func (r *Reconciler) currentMirror(ctx context.Context, name string) (*v1alpha1.SyncSecret, error) {
	ss := &v1alpha1.SyncSecret{}
	err := r.Hub.Get(ctx, client.ObjectKey{Namespace: r.Opts.Namespace, Name: name}, ss)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("getting SyncSecret %s/%s: %w", r.Opts.Namespace, name, err)
	}
	return ss, nil
}

// hasMirror tells whether the hub cache holds a SyncSecret of Secret key.
func (r *Reconciler) hasMirror(ctx context.Context, key types.NamespacedName) bool {
	list := &v1alpha1.SyncSecretList{}
	if err := r.Hub.List(ctx, list, client.InNamespace(r.Opts.Namespace), client.MatchingFields{indexOrigin: key.String()}); err != nil {
		return true // let release find out
	}
	return len(list.Items) > 0
}

// release removes the mirror of a Secret the hub no longer needs (deleted, no longer named or
// labelled, or refused) and then the finalizer.
func (r *Reconciler) release(ctx context.Context, key types.NamespacedName) error {
	defer r.managed.Set(key, false)
	if err := r.deleteMirrors(ctx, key, ""); err != nil {
		return err
	}
	secret := &corev1.Secret{}
	if err := r.TenantReader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading Secret %s: %w", key, err)
	}
	r.created.Delete(secret.UID)
	if secret.DeletionTimestamp != nil {
		r.warned.Delete(secret.UID)
	}
	if removed, err := finalizer.Remove(ctx, r.Tenant, secret, v1alpha1.CleanupFinalizer); err != nil || !removed {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("released Secret")
	return nil
}

// deleteMirrors deletes the SyncSecrets mirroring Secret key (by their origin labels), except
// the one named keep.
func (r *Reconciler) deleteMirrors(ctx context.Context, key types.NamespacedName, keep types.UID) error {
	list := &v1alpha1.SyncSecretList{}
	if err := r.Hub.List(ctx, list, client.InNamespace(r.Opts.Namespace), client.MatchingFields{indexOrigin: key.String()}); err != nil {
		return fmt.Errorf("listing SyncSecrets of Secret %s: %w", key, err)
	}
	for i := range list.Items {
		ss := &list.Items[i]
		if ss.Name == string(keep) || ss.DeletionTimestamp != nil {
			continue
		}
		if err := r.Hub.Delete(ctx, ss, client.Preconditions{UID: &ss.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting SyncSecret %s/%s of Secret %s: %w", r.Opts.Namespace, ss.Name, key, err)
		}
		ctrl.LoggerFrom(ctx).Info("deleted SyncSecret", "syncSecret", client.ObjectKeyFromObject(ss))
	}
	return nil
}
