package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/envoygatewaycrds"
	"kubelb.dev/kubelb/internal/gatewaycrds"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/hubschema"
	"kubelb.dev/kubelb/internal/logging"
	"kubelb.dev/kubelb/internal/metrics"
)

// crdInstallTimeout bounds the wait for installed Gateway API CRDs to be established.
const crdInstallTimeout = time.Minute

// Options configure the Layer 7 controllers.
type Options struct {
	// Namespace is the tenant's namespace on the hub.
	Namespace string
	// EventSource is the name Events are recorded under.
	EventSource string
	// Ingress mirrors Ingresses (of class kubelb when UseIngressClass).
	Ingress         bool
	UseIngressClass bool
	// GatewayAPI runs the Gateway API controllers, except the kinds in Disabled (Kind.Name).
	GatewayAPI      bool
	UseGatewayClass bool
	Disabled        map[string]bool
	// GatewayServices keeps a tenant Service per served Gateway (GatewayServiceReconciler).
	GatewayServices bool
	// InstallCRDs installs the Gateway API CRDs of CRDsChannel at start-up (with GatewayAPI).
	InstallCRDs bool
	CRDsChannel string
	// MaxConcurrentReconciles is the number of workers per controller (0: 1).
	MaxConcurrentReconciles int
	// HubSchema is the hub's schema of kubelb's CRDs (nil: unknown, nothing left out).
	HubSchema *hubschema.Loader
}

// Setup installs the Gateway API CRDs when asked, and adds the controllers of the enabled kinds
// to mgr (tenant); hub is the management cluster (its cache covers the tenant's namespace
// only), hubc the ccm's client for it. A kind whose API the tenant does not serve is skipped
// with a logged warning.
func Setup(mgr ctrl.Manager, hub cluster.Cluster, hubc client.Client, o Options) error {
	log := mgr.GetLogger().WithName("l7")
	if !o.Ingress && !o.GatewayAPI {
		return nil
	}
	if o.GatewayAPI && o.InstallCRDs {
		ctx, cancel := context.WithTimeout(context.Background(), crdInstallTimeout)
		defer cancel()
		if err := InstallCRDs(ctx, mgr.GetClient(), mgr.GetAPIReader(), o.CRDsChannel); err != nil {
			return err
		}
		log.Info("installed the Gateway API CRDs", "channel", o.CRDsChannel)
		// Envoy Gateway's policy CRDs, each only when the tenant has none (Envoy Gateway's own
		// are never replaced).
		created, err := InstallPolicyCRDs(ctx, mgr.GetClient(), mgr.GetAPIReader())
		if err != nil {
			return err
		}
		for _, name := range created {
			log.Info("installed Envoy Gateway's CRD (it was absent)", "crd", name, "version", envoygatewaycrds.Version)
		}
	}
	if err := IndexHub(context.Background(), hub.GetFieldIndexer()); err != nil {
		return err
	}
	served := func(gvk schema.GroupVersionKind) bool {
		_, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		return err == nil
	}
	gatewayAPI := o.GatewayAPI
	if gatewayAPI && (!served(gwapiv1.SchemeGroupVersion.WithKind("Gateway")) || !served(gwapiv1.SchemeGroupVersion.WithKind("GatewayClass"))) {
		logging.Warn(log, "WARNING: the tenant cluster does not serve Gateway API v1 Gateways and GatewayClasses; Gateway API objects are not mirrored (install the CRDs, or use --install-gateway-api-crds)")
		gatewayAPI = false
	}
	grants := gatewayAPI && served(gwapiv1beta1.SchemeGroupVersion.WithKind("ReferenceGrant"))
	if gatewayAPI && !grants {
		logging.Warn(log, "WARNING: the tenant cluster does not serve ReferenceGrants (v1beta1); cross-namespace references are not permitted")
	}
	policies := gatewayAPI && served(gwapiv1.SchemeGroupVersion.WithKind("BackendTLSPolicy"))
	if gatewayAPI && !policies {
		logging.Warn(log, "WARNING: the tenant cluster does not serve BackendTLSPolicies (v1); backends are reached in plain text")
	}
	if policies {
		if err := indexPolicies(context.Background(), mgr.GetFieldIndexer()); err != nil {
			return err
		}
	}
	// Envoy Gateway's policy kinds the tenant serves.
	var egKinds []*PolicyKind
	for _, pk := range PolicyKinds {
		switch {
		case !gatewayAPI:
		case served(pk.GVK()):
			egKinds = append(egKinds, pk)
		default:
			logging.Warn(log, "WARNING: the tenant cluster does not serve Envoy Gateway's "+pk.Kind+"s (gateway.envoyproxy.io/v1alpha1); they are not read (install Envoy Gateway's CRDs, or use --install-gateway-api-crds)")
		}
	}
	if err := indexPolicyKinds(context.Background(), mgr.GetFieldIndexer(), egKinds); err != nil {
		return err
	}
	var trafficKindsSet []Kind
	var policyKindsSet []Kind
	var carriers []*Reconciler // those whose Routes carry Envoy Gateway's policies
	listenerSets := gatewayAPI && served(ListenerSet.GroupVersionKind()) && !o.Disabled[ListenerSet.Name]
	twins := newTwinRefs()
	workers := o.MaxConcurrentReconciles
	if workers <= 0 {
		workers = 1
	}
	for _, k := range Kinds {
		switch {
		case k.Name == Ingress.Name && !o.Ingress, k.GatewayAPI() && !gatewayAPI, o.Disabled[k.Name]:
			continue
		case !served(k.GroupVersionKind()):
			logging.Warn(log, "WARNING: the tenant cluster does not serve "+k.GroupVersionKind().GroupVersion().String()+" "+k.String()+"; not mirrored", "kind", k.String())
			continue
		}
		r := &Reconciler{Kind: k, Tenant: mgr.GetClient(), Hub: hubc, Recorder: mgr.GetEventRecorder(o.EventSource),
			Namespace: o.Namespace, UseIngressClass: o.UseIngressClass, UseGatewayClass: o.UseGatewayClass,
			ReferenceGrants: grants, BackendTLSPolicies: policies && appliesBackendTLS(k), ListenerSets: listenerSets,
			Policies:  mgr.GetCache(),
			HubSchema: o.HubSchema, twins: twins, managed: metrics.NewManagedSet(k.Managed),
			Slices: mgr.GetAPIReader()}
		if appliesPolicies(k) {
			r.PolicyKinds = egKinds
		}
		if k.Name == Gateway.Name && slices.Contains(egKinds, ClientTrafficPolicyKind) {
			r.Secrets = mgr.GetAPIReader() // the CA Secrets of its ClientTrafficPolicies
		}
		if err := r.setup(mgr, hub, workers); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", k.String(), err)
		}
		if r.BackendTLSPolicies {
			policyKindsSet = append(policyKindsSet, k)
		}
		if len(r.PolicyKinds) > 0 && k.AttachesToGateway() {
			trafficKindsSet = append(trafficKindsSet, k)
		}
		if len(r.PolicyKinds) > 0 {
			carriers = append(carriers, r)
		}
	}
	for _, r := range carriers { // read when reconciling only: after this loop
		r.PolicyTargetKinds = trafficKindsSet
	}
	for _, pk := range egKinds {
		tr := &TrafficPolicyReconciler{Policy: pk, Tenant: mgr.GetClient(), Reader: mgr.GetCache(), Recorder: mgr.GetEventRecorder(o.EventSource),
			UseGatewayClass: o.UseGatewayClass, Kinds: trafficKindsSet, Hub: hub.GetCache(), Namespace: o.Namespace}
		if pk == SecurityPolicyKind { // its basicAuth's Secret is checked
			if err := indexBasicAuthSecrets(context.Background(), mgr.GetFieldIndexer()); err != nil {
				return err
			}
			if err := indexExtAuthServices(context.Background(), mgr.GetFieldIndexer()); err != nil {
				return err
			}
			tr.Secrets = mgr.GetAPIReader()
		}
		if err := setupTrafficPolicies(mgr, hub, tr, workers); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", pk.Kind, err)
		}
	}
	if len(policyKindsSet) > 0 {
		pr := &PolicyReconciler{Tenant: mgr.GetClient(), Recorder: mgr.GetEventRecorder(o.EventSource),
			UseGatewayClass: o.UseGatewayClass, Kinds: policyKindsSet}
		if err := setupPolicies(mgr, pr, workers); err != nil {
			return fmt.Errorf("setting up the BackendTLSPolicy controller: %w", err)
		}
	}
	if o.Ingress && !o.Disabled[Ingress.Name] && served(networkingv1.SchemeGroupVersion.WithKind("IngressClass")) {
		if err := setupIngressClass(mgr); err != nil {
			return fmt.Errorf("setting up the IngressClass controller: %w", err)
		}
	}
	// The EndpointSlices of the twins of Services without a selector.
	if err := setupSlices(mgr, &SliceReconciler{Tenant: mgr.GetClient(), Recorder: mgr.GetEventRecorder(o.EventSource)}, workers); err != nil {
		return fmt.Errorf("setting up the EndpointSlice controller: %w", err)
	}
	if gatewayAPI && !o.Disabled[Gateway.Name] && o.GatewayServices {
		gs := &GatewayServiceReconciler{Tenant: mgr.GetClient(), Recorder: mgr.GetEventRecorder(o.EventSource), UseGatewayClass: o.UseGatewayClass}
		if err := setupGatewayServices(mgr, gs, workers); err != nil {
			return fmt.Errorf("setting up the Gateway Service controller: %w", err)
		}
	}
	if gatewayAPI && !o.Disabled[Gateway.Name] {
		// One event at start makes sure the GatewayClass kubelb exists.
		start := make(chan event.TypedGenericEvent[*gwapiv1.GatewayClass], 1)
		start <- event.TypedGenericEvent[*gwapiv1.GatewayClass]{Object: DesiredGatewayClass()}
		err := builder.ControllerManagedBy(mgr).
			Named("ccm-gatewayclass").
			For(&gwapiv1.GatewayClass{}).
			WatchesRawSource(source.Channel(start, &handler.TypedEnqueueRequestForObject[*gwapiv1.GatewayClass]{})).
			// The hub's TenantState says whether Gateway API is allowed: every class again.
			WatchesRawSource(source.Kind(hub.GetCache(), &v1alpha1.TenantState{},
				handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, _ *v1alpha1.TenantState) []reconcile.Request {
					return classRequests(ctx, mgr.GetClient())
				}))).
			Complete(&GatewayClassReconciler{Tenant: mgr.GetClient(), Hub: hub.GetAPIReader(), Namespace: o.Namespace})
		if err != nil {
			return fmt.Errorf("setting up the GatewayClass controller: %w", err)
		}
	}
	return nil
}

// classRequests are requests for every GatewayClass of kubelb's controllerName.
func classRequests(ctx context.Context, c client.Reader) []reconcile.Request {
	list := &gwapiv1.GatewayClassList{}
	if err := c.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing GatewayClasses")
		return nil
	}
	var out []reconcile.Request
	for _, gc := range list.Items {
		if gc.Spec.ControllerName == ControllerName {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&gc)})
		}
	}
	return out
}

// setup registers the controller of r's kind and its watches.
func (r *Reconciler) setup(mgr ctrl.Manager, hub cluster.Cluster, workers int) error {
	k := r.Kind
	ctx := context.Background()
	if err := indexTenant(ctx, mgr.GetFieldIndexer(), k); err != nil {
		return err
	}

	// requests lists the objects of the kind matching opts as requests.
	requests := func(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
		list := k.NewList()
		if err := mgr.GetClient().List(ctx, list, opts...); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing "+k.String()+"s")
			return nil
		}
		var out []reconcile.Request
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if co, ok := o.(client.Object); ok {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(co)})
			}
			return nil
		})
		return out
	}
	routeToObject := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, rt *v1alpha1.Route) []reconcile.Request {
		if kind, key, ok := routeOrigin(rt); ok && kind == k.OriginKind() {
			return []reconcile.Request{{NamespacedName: key}}
		}
		return nil
	})
	serviceToObjects := handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, svc *corev1.Service) []reconcile.Request {
		key := client.ObjectKeyFromObject(svc)
		if isTwin(svc) {
			key = types.NamespacedName{Namespace: svc.Namespace, Name: svc.Labels[v1alpha1.LabelOriginName]}
		}
		out := requests(ctx, client.MatchingFields{indexBackends: key.String()})
		if slices.Contains(r.PolicyKinds, SecurityPolicyKind) { // the objects whose policy's extAuth names it
			list := SecurityPolicyKind.NewList()
			if err := mgr.GetCache().List(ctx, list, client.InNamespace(key.Namespace), client.MatchingFields{indexExtAuthService: key.Name}); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "listing SecurityPolicies")
				return out
			}
			for i := range list.Items {
				out = append(out, trafficTargetsOfKind(ctx, mgr.GetCache(), k, &list.Items[i])...)
			}
		}
		return out
	})
	namespaceToObjects := handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, ns *corev1.Namespace) []reconcile.Request {
		return requests(ctx, client.InNamespace(ns.Name))
	})

	b := builder.ControllerManagedBy(mgr).
		Named("ccm-"+k.Name).
		For(k.New(), builder.WithPredicates(objectPredicate)).
		WatchesRawSource(source.Kind(hub.GetCache(), &v1alpha1.Route{}, routeToObject)).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Service{}, serviceToObjects, serviceSpecOrLabelsChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers})
	if k.GatewayAPI() {
		b = b.WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Namespace{}, namespaceToObjects, namespaceLabelsChanged))
		// A GatewayClass changing its controllerName can change which objects are served.
		b = b.WatchesRawSource(source.Kind(mgr.GetCache(), &gwapiv1.GatewayClass{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, _ *gwapiv1.GatewayClass) []reconcile.Request {
				return requests(ctx)
			}), predicate.TypedGenerationChangedPredicate[*gwapiv1.GatewayClass]{}))
	}
	if k.GatewayAPI() && r.ReferenceGrants {
		b = b.WatchesRawSource(source.Kind(mgr.GetCache(), &gwapiv1beta1.ReferenceGrant{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, g *gwapiv1beta1.ReferenceGrant) []reconcile.Request {
				var out []reconcile.Request
				for _, f := range g.Spec.From {
					if string(f.Kind) == k.String() && string(f.Group) == gatewayGroup {
						out = append(out, requests(ctx, client.InNamespace(string(f.Namespace)))...)
					}
				}
				return out
			})))
	}
	if r.BackendTLSPolicies {
		// A policy, or a ConfigMap it names, changes the TLS of the routes using its targets.
		targetsToObjects := func(ctx context.Context, p *gwapiv1.BackendTLSPolicy) []reconcile.Request {
			var out []reconcile.Request
			for _, t := range p.Spec.TargetRefs {
				if t.Group == "" && t.Kind == kindService {
					out = append(out, requests(ctx, client.MatchingFields{indexBackends: p.Namespace + "/" + string(t.Name)})...)
				}
			}
			return out
		}
		b = b.WatchesRawSource(source.Kind(mgr.GetCache(), &gwapiv1.BackendTLSPolicy{},
			handler.TypedEnqueueRequestsFromMapFunc(targetsToObjects), predicate.TypedGenerationChangedPredicate[*gwapiv1.BackendTLSPolicy]{}))
		b = b.WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.ConfigMap{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, cm *corev1.ConfigMap) []reconcile.Request {
				list := &gwapiv1.BackendTLSPolicyList{}
				if err := mgr.GetClient().List(ctx, list, client.InNamespace(cm.Namespace), client.MatchingFields{indexPolicyConfigMaps: client.ObjectKeyFromObject(cm).String()}); err != nil {
					ctrl.LoggerFrom(ctx).Error(err, "listing BackendTLSPolicies")
					return nil
				}
				var out []reconcile.Request
				for i := range list.Items {
					out = append(out, targetsToObjects(ctx, &list.Items[i])...)
				}
				return out
			})))
	}
	for _, pk := range r.PolicyKinds {
		if !pk.targets(k.String()) {
			continue // its policies never target objects of this kind
		}
		// A policy changes the Routes of the objects it targets (before and after a change:
		// the map runs on both).
		b = b.WatchesRawSource(source.Kind[client.Object](mgr.GetCache(), pk.New(),
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, p client.Object) []reconcile.Request {
				return trafficTargetsOfKind(ctx, mgr.GetCache(), k, p)
			}), predicate.GenerationChangedPredicate{}))
		// An object of the kind created, deleted, gaining or losing labels changes what the
		// policies of its namespace with a targetSelector of the kind select: the others they
		// select are re-mirrored (a policy selecting too many applies to none of them).
		b = b.WatchesRawSource(source.Kind[client.Object](mgr.GetCache(), k.New(),
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				list := pk.NewList()
				if err := mgr.GetCache().List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{pk.index: selectorKey(k.String())}); err != nil {
					ctrl.LoggerFrom(ctx).Error(err, "listing "+pk.Kind+"s")
					return nil
				}
				var out []reconcile.Request
				for i := range list.Items {
					out = append(out, trafficTargetsOfKind(ctx, mgr.GetCache(), k, &list.Items[i])...)
				}
				return out
			}), labelsChanged))
	}
	if k.Name == Gateway.Name {
		// A ConfigMap a Gateway's client certificate validation (or its ClientTrafficPolicy's)
		// names changes its Route.
		b = b.WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.ConfigMap{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, cm *corev1.ConfigMap) []reconcile.Request {
				out := requests(ctx, client.MatchingFields{indexFrontendCA: client.ObjectKeyFromObject(cm).String()})
				if r.Secrets == nil { // ClientTrafficPolicies are not read
					return out
				}
				return append(out, clientTrafficCATargets(ctx, mgr.GetCache(), k, "ConfigMap", client.ObjectKeyFromObject(cm))...)
			})))
		if r.Secrets != nil {
			if err := indexClientTrafficCAs(ctx, mgr.GetFieldIndexer()); err != nil {
				return err
			}
			// A Secret its ClientTrafficPolicy's client validation names appears, changes or
			// goes (metadata only).
			secret := &metav1.PartialObjectMetadata{}
			secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kindSecret))
			b = b.WatchesRawSource(source.Kind[client.Object](mgr.GetCache(), secret, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return clientTrafficCATargets(ctx, mgr.GetCache(), k, kindSecret, client.ObjectKeyFromObject(o))
			}), predicate.ResourceVersionChangedPredicate{}))
		}
	}
	if k.AttachesToGateway() && r.ListenerSets {
		// A ListenerSet whose Gateway is served serves the routes attached to it.
		b = b.WatchesRawSource(source.Kind(mgr.GetCache(), &gwapiv1.ListenerSet{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, ls *gwapiv1.ListenerSet) []reconcile.Request {
				return requests(ctx, client.MatchingFields{indexListenerSets: client.ObjectKeyFromObject(ls).String()})
			}), predicate.TypedGenerationChangedPredicate[*gwapiv1.ListenerSet]{}))
	}
	if k.AttachesToGateway() || k.Name == ListenerSet.Name {
		b = b.WatchesRawSource(source.Kind(mgr.GetCache(), &gwapiv1.Gateway{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, gw *gwapiv1.Gateway) []reconcile.Request {
				return requests(ctx, client.MatchingFields{indexParents: client.ObjectKeyFromObject(gw).String()})
			}), predicate.TypedGenerationChangedPredicate[*gwapiv1.Gateway]{}))
	}
	return b.Complete(r)
}

// InstallCRDs applies the Gateway API CRDs of a channel (server-side apply, field owner
// kubelb-ccm) and waits until they are established.
func InstallCRDs(ctx context.Context, c client.Client, reader client.Reader, channel string) error {
	crds, err := gatewaycrds.CRDs(channel)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		crd := crd.DeepCopy()
		crd.TypeMeta.APIVersion = apiextensionsv1.SchemeGroupVersion.String()
		crd.TypeMeta.Kind = "CustomResourceDefinition"
		crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			return err
		}
		delete(u, "status")
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}), client.FieldOwner(hubnames.FieldOwnerCCM), client.ForceOwnership); err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			cur := &apiextensionsv1.CustomResourceDefinition{}
			if err := reader.Get(ctx, client.ObjectKey{Name: crd.Name}, cur); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			for _, cond := range cur.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return errors.Join(fmt.Errorf("waiting for CRD %s to be established", crd.Name), err)
		}
	}
	return nil
}
