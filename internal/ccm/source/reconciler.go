package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/finalizer"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/hubschema"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/ssa"
)

// Event reasons.
const (
	ReasonRouteCreated = "RouteCreated"
	// ReasonHubFeatureUnavailable: the hub's Route CRD (KubeLB CE, an older kubelb) does not
	// declare a field the object needs; it is left out and the feature is unavailable there.
	ReasonHubFeatureUnavailable = "HubFeatureUnavailable"
	ReasonHubError              = "HubError"
	ReasonTwinConflict          = "NodePortServiceConflict"
	ReasonBackendUnsupported    = "BackendNotMirrored"
)

// Reconciler mirrors the tenant objects of one Kind into hub Routes, keeps the NodePort
// twins of their ClusterIP backends, and copies the hub's status back. It has the ccm's
// controller shape (docs/development.md): get → release (or drop a legacy finalizer) → scope → DesiredRoute
// (pure) → apply under hubnames.FieldOwnerCCM when drifted → one status write.
//
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;listenersets;httproutes;grpcroutes;tlsroutes;tcproutes;udproutes,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways/status;listenersets/status;httproutes/status;grpcroutes/status;tlsroutes/status;tcproutes/status;udproutes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=referencegrants,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
type Reconciler struct {
	Kind Kind
	// Tenant reads from the tenant cache and writes to the tenant.
	Tenant client.Client
	// Hub reads from the hub cache and writes to the hub.
	Hub client.Client
	// Recorder records Events on tenant objects.
	Recorder events.EventRecorder
	// Namespace is the tenant's namespace on the hub.
	Namespace string
	// UseIngressClass and UseGatewayClass are --use-ingress-class and --use-gateway-class.
	UseIngressClass, UseGatewayClass bool
	// ReferenceGrants tells whether the tenant serves ReferenceGrants (v1beta1).
	ReferenceGrants bool
	// BackendTLSPolicies tells whether the tenant serves BackendTLSPolicies (v1) and the
	// kind's backends get their TLS (HTTPRoutes, GRPCRoutes).
	BackendTLSPolicies bool
	// PolicyKinds are Envoy Gateway's policy kinds (BackendTrafficPolicy, SecurityPolicy) the
	// tenant serves when the kind's Routes carry them (Gateways and Gateway API routes);
	// Policies reads them (the tenant cache, unstructured).
	PolicyKinds []*PolicyKind
	Policies    client.Reader
	// PolicyTargetKinds are the route kinds set up whose objects policies may select
	// (targetSelectors; the Gateways besides).
	PolicyTargetKinds []Kind
	// ListenerSets tells whether the tenant serves ListenerSets (gateway-api v1.6's v1):
	// routes attached to one are mirrored when its Gateway is served.
	ListenerSets bool
	// HubSchema is the hub's schema of kubelb's CRDs (nil: unknown, nothing left out).
	HubSchema *hubschema.Loader
	// Secrets reads the Secrets a Gateway's ClientTrafficPolicy names for client certificate
	// validation (the tenant API server: the cache keeps Secrets' metadata only); nil: not
	// read (they are reported missing and the hub fails closed).
	Secrets client.Reader
	// Slices reads EndpointSlices from the tenant API server, to hold a Route back while a
	// twin it needs has just been made and lists no endpoint yet (TwinReady); nil: never held.
	Slices client.Reader

	// hubNotes remembers, per object, what the hub's schema made unavailable (said once);
	// problemNotes, per object, the hub's problems last told in a Warning Event.
	hubNotes, problemNotes hubschema.Reported
	twins                  *twinRefs
	managed                *metrics.ManagedSet
}

// scope is what a Route depends on besides the object.
type scope struct {
	// current is the Route as the hub cache has it (nil: none).
	current *v1alpha1.Route
	// refs are the object's references; services the backend Services to embed.
	refs     []Ref
	services []corev1.Service
	// twins are the NodePort twins the object uses ("ns/name").
	twins []types.NamespacedName
	// warming are the twins just made whose EndpointSlices list no endpoint yet (TwinReady):
	// the Route is not written until they do.
	warming []types.NamespacedName
	// context is the SourceContext (Gateway API kinds only).
	context *v1alpha1.SourceContext
}

// Reconcile brings the hub Route of one tenant object in line with it.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	start := time.Now()
	defer func() { r.Kind.Reconcile.Observe(req.Namespace, metrics.Result(err), start) }()
	defer func() { res, err = ssa.RetryConflict(res, err) }()

	obj := r.Kind.New()
	if err := r.Tenant.Get(ctx, req.NamespacedName, obj); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("getting %s %s: %w", r.Kind.String(), req.NamespacedName, err)
		}
		// Gone: remove what is left behind (its Routes are found by origin labels).
		r.managed.Set(req.NamespacedName, false)
		r.hubNotes.Forget(req.NamespacedName.String())
		r.problemNotes.Forget(req.NamespacedName.String())
		return reconcile.Result{}, r.deleteRoutes(ctx, nil, req.NamespacedName, "")
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("encoding %s %s: %w", r.Kind.String(), req.NamespacedName, err)
	}
	served, err := r.served(ctx, obj, u)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !served || obj.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, r.release(ctx, obj, u)
	}
	// No finalizer: a Layer 7 object that is deleted goes at once, so one re-created under the
	// same name (GitOps, the Gateway API conformance suite) is never an update of the one
	// being deleted. Its Route goes by UID instead (deleteRoutes, also after a restart through
	// the hub Route's events). The finalizer earlier versions added is removed.
	unfinalized, err := finalizer.Remove(ctx, r.Tenant, obj, v1alpha1.CleanupFinalizer)
	if err != nil {
		return reconcile.Result{}, err
	}
	if unfinalized {
		if u, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return reconcile.Result{}, err
		}
	}

	// From here on the object's twins are in use: recorded before they are made, so that a
	// concurrent clean-up does not delete them (twinRefs).
	sc, err := r.loadScope(ctx, obj, u)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(sc.warming) > 0 {
		// A twin made for it has no endpoint yet: the Route it would send there is written
		// once the twin's NodePort serves (at most TwinWarmup); until then the hub keeps
		// serving the Route as it was.
		ctrl.LoggerFrom(ctx).V(1).Info("waiting for new NodePort Services to list endpoints", "services", sc.warming)
		return reconcile.Result{RequeueAfter: twinWarmupPoll}, nil
	}
	defer func() { // the one status write
		err = errors.Join(err, r.writeStatus(ctx, obj, u, sc.current))
	}()
	desired := DesiredRoute(r.Kind, u, r.Namespace, sc.services, sc.context)
	var tls []v1alpha1.BackendTLS
	if sc.context != nil {
		tls = sc.context.BackendTLS
	}
	// Only what the hub's CRDs declare is written and compared; what that costs is said once.
	removed, lost := r.HubSchema.Fit("Route", desired)
	if ctx := desired.Spec.Source.Kubernetes.Context; len(tls) > 0 && (ctx == nil || len(ctx.BackendTLS) == 0) {
		WithoutTLSBackends(desired, tls) // a hub that cannot carry backend TLS never gets them in plain text
	}
	if note, ok := r.hubNotes.Note(req.NamespacedName.String(), "Route", removed, lost); ok {
		record(r.Recorder, obj, corev1.EventTypeWarning, ReasonHubFeatureUnavailable, "%s", note)
	}
	if err := r.applyRoute(ctx, obj, sc.current, desired); err != nil {
		return reconcile.Result{}, err
	}
	r.managed.Set(req.NamespacedName, true)
	if err := r.collectTwins(ctx, obj.GetUID(), sc.current, sc.twins); err != nil {
		return reconcile.Result{}, err
	}
	// An object re-created under the same name has a new UID: its old Route goes.
	return reconcile.Result{}, r.deleteRoutes(ctx, obj, req.NamespacedName, obj.GetUID())
}

// served tells whether the ccm mirrors the object.
func (r *Reconciler) served(ctx context.Context, obj client.Object, u map[string]any) (bool, error) {
	switch {
	case r.Kind.Name == Ingress.Name:
		return IngressServed(obj.(*networkingv1.Ingress), r.UseIngressClass), nil
	case r.Kind.Name == Gateway.Name:
		gw := obj.(*gwapiv1.Gateway)
		return getGatewayServed(ctx, r.Tenant, client.ObjectKeyFromObject(gw), r.UseGatewayClass)
	case r.Kind.Name == ListenerSet.Name:
		p, ok := ListenerSetGateway(u, obj.GetNamespace())
		if !ok {
			return false, nil
		}
		return getGatewayServed(ctx, r.Tenant, client.ObjectKey{Namespace: p.Namespace, Name: p.Name}, r.UseGatewayClass)
	default:
		for _, p := range ParentRefs(u, obj.GetNamespace()) {
			ok, err := getGatewayServed(ctx, r.Tenant, client.ObjectKey{Namespace: p.Namespace, Name: p.Name}, r.UseGatewayClass)
			if err != nil || ok {
				return ok, err
			}
		}
		if !r.ListenerSets {
			return false, nil
		}
		// A route attached to a ListenerSet is served when the ListenerSet's Gateway is.
		for _, p := range ListenerSetParents(u, obj.GetNamespace()) {
			ls := &gwapiv1.ListenerSet{}
			if err := r.Tenant.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Name}, ls); err != nil {
				if client.IgnoreNotFound(err) != nil {
					return false, fmt.Errorf("getting ListenerSet %s/%s: %w", p.Namespace, p.Name, err)
				}
				continue
			}
			gw, ok := ListenerSetGateway(toUnstructured(ls), ls.Namespace)
			if !ok {
				continue
			}
			ok, err := getGatewayServed(ctx, r.Tenant, client.ObjectKey{Namespace: gw.Namespace, Name: gw.Name}, r.UseGatewayClass)
			if err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	}
}

// loadScope reads the Route as it is, the object's references, the grants and namespace
// labels, and ensures the NodePort twins of its ClusterIP backends (and of the extAuth
// Service of the SecurityPolicy it carries).
func (r *Reconciler) loadScope(ctx context.Context, obj client.Object, u map[string]any) (scope, error) {
	var sc scope
	current, err := r.currentRoute(ctx, obj.GetUID())
	if err != nil {
		return sc, err
	}
	sc.current = current
	sc.refs = ObjectRefs(r.Kind, u, obj.GetNamespace())
	var grants []gwapiv1beta1.ReferenceGrant
	if r.Kind.GatewayAPI() && r.ReferenceGrants && slices.ContainsFunc(sc.refs, func(ref Ref) bool { return ref.Namespace != obj.GetNamespace() }) {
		list := &gwapiv1beta1.ReferenceGrantList{}
		if err := r.Tenant.List(ctx, list); err != nil {
			return sc, fmt.Errorf("listing ReferenceGrants: %w", err)
		}
		grants = list.Items
	}
	if r.Kind.GatewayAPI() {
		ns := &corev1.Namespace{}
		if err := r.Tenant.Get(ctx, client.ObjectKey{Name: obj.GetNamespace()}, ns); client.IgnoreNotFound(err) != nil {
			return sc, fmt.Errorf("getting Namespace %s: %w", obj.GetNamespace(), err)
		}
		sc.context = DesiredContext(r.Kind.String(), obj.GetNamespace(), ns.Labels, sc.refs, grants)
	}
	if sc.context != nil {
		if err := r.carryPolicies(ctx, obj, u, sc.context); err != nil {
			return sc, err
		}
	}
	if r.Kind.Name == Gateway.Name && sc.context != nil {
		if err := r.frontendCA(ctx, u, obj.GetNamespace(), grants, sc.context); err != nil {
			return sc, err
		}
	}
	backends := ServiceBackends(sc.refs, r.Kind.String(), obj.GetNamespace(), grants)
	// The authorization service of the SecurityPolicy carried is embedded as backends are.
	backends = extAuthBackend(backends, sc.context, obj.GetNamespace())
	sc.services, sc.twins, sc.warming, err = r.backendServices(ctx, obj, backends)
	if err != nil || !r.BackendTLSPolicies || sc.context == nil {
		return sc, err
	}
	sc.context.BackendTLS, sc.context.BackendCACertificates, err = r.backendTLS(ctx, u, obj.GetNamespace(), backends)
	return sc, err
}

// frontendCA adds to a Gateway's context the ConfigMaps of its client certificate
// validation (DesiredFrontendCA): those of its namespace and those a ReferenceGrant permits,
// as the tenant cache has them (their key ca.crt only); then those and the Secrets its
// ClientTrafficPolicies' tls.clientValidation name (DesiredPolicyCA; Secrets read from the
// tenant API server, key ca.crt).
func (r *Reconciler) frontendCA(ctx context.Context, u map[string]any, ns string, grants []gwapiv1beta1.ReferenceGrant, sc *v1alpha1.SourceContext) error {
	var refs []types.NamespacedName
	cms := map[types.NamespacedName]*corev1.ConfigMap{}
	for _, ref := range FrontendCARefs(u, ns) {
		if !Permitted(Ref{Kind: "ConfigMap", Namespace: ref.Namespace, Name: ref.Name}, r.Kind.String(), ns, grants) {
			continue
		}
		refs = append(refs, ref)
		cm := &corev1.ConfigMap{}
		if err := r.Tenant.Get(ctx, ref, cm); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("getting ConfigMap %s: %w", ref, err)
		}
		cms[ref] = cm
	}
	sc.FrontendCACertificates, sc.BackendCACertificates = DesiredFrontendCA(refs, cms, sc.BackendCACertificates)
	// The ConfigMaps and Secrets of its ClientTrafficPolicies' client validations (their
	// namespace's: no grant is needed).
	policyRefs := ClientTrafficCARefs(sc)
	if len(policyRefs) == 0 {
		return nil
	}
	cas := map[PolicyCARef]string{}
	for _, ref := range policyRefs {
		switch ref.Kind {
		case kindSecret:
			if r.Secrets == nil {
				continue // not read: reported as missing, the hub fails closed
			}
			secret := &corev1.Secret{}
			if err := r.Secrets.Get(ctx, ref.NamespacedName, secret); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return fmt.Errorf("getting Secret %s: %w", ref.NamespacedName, err)
			}
			cas[ref] = string(secret.Data[caCertKey])
		default:
			cm := &corev1.ConfigMap{}
			if err := r.Tenant.Get(ctx, ref.NamespacedName, cm); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return fmt.Errorf("getting ConfigMap %s: %w", ref.NamespacedName, err)
			}
			cas[ref] = cm.Data[caCertKey]
		}
	}
	sc.FrontendCACertificates, sc.BackendCACertificates = DesiredPolicyCA(sc.FrontendCACertificates, sc.BackendCACertificates, policyRefs, cas)
	return nil
}

// backendTLS is what the Route carries of the BackendTLSPolicies targeting the object's
// backend Services (DesiredBackendTLS): the permitted backends' ports, their policies and
// ConfigMaps, as the tenant cache has them.
func (r *Reconciler) backendTLS(ctx context.Context, u map[string]any, ns string, backends []types.NamespacedName) ([]v1alpha1.BackendTLS, []string, error) {
	policies, verdicts, err := policyScope(ctx, r.Tenant, backends)
	if err != nil || len(policies) == 0 {
		return nil, nil, err
	}
	services := map[types.NamespacedName]*corev1.Service{}
	for _, b := range backends {
		svc := &corev1.Service{}
		if err := r.Tenant.Get(ctx, b, svc); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, nil, fmt.Errorf("getting Service %s: %w", b, err)
		}
		services[b] = svc
	}
	var ports []PortRef
	for _, p := range BackendPorts(u, ns) {
		if slices.Contains(backends, types.NamespacedName{Namespace: p.Namespace, Name: p.Name}) {
			ports = append(ports, p)
		}
	}
	entries, bundles := DesiredBackendTLS(ports, services, policies, verdicts)
	return entries, bundles, nil
}

// backendServices returns the Services to embed for the backends: NodePort and LoadBalancer
// Services as they are, ClusterIP Services through their NodePort twins (made or updated
// here). Missing Services and ExternalName Services are left out: the manager reports the
// backend as unresolved.
func (r *Reconciler) backendServices(ctx context.Context, obj client.Object, backends []types.NamespacedName) (out []corev1.Service, used, warming []types.NamespacedName, err error) {
	var twinKeys []types.NamespacedName
	for _, b := range backends {
		svc := &corev1.Service{}
		if err := r.Tenant.Get(ctx, b, svc); err == nil && svc.Spec.Type == corev1.ServiceTypeClusterIP {
			if name, ok := TwinName(b.Name); ok {
				twinKeys = append(twinKeys, types.NamespacedName{Namespace: b.Namespace, Name: name})
			}
		}
	}
	r.twins.use(obj.GetUID(), twinKeys)

	for _, b := range backends {
		svc := &corev1.Service{}
		if err := r.Tenant.Get(ctx, b, svc); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, nil, nil, fmt.Errorf("getting Service %s: %w", b, err)
		}
		switch svc.Spec.Type {
		case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
			out = append(out, *svc)
		case corev1.ServiceTypeClusterIP, "":
			twin, err := r.ensureTwin(ctx, obj, svc)
			if err != nil {
				return nil, nil, nil, err
			}
			if twin != nil {
				out = append(out, *twin)
				used = append(used, client.ObjectKeyFromObject(twin))
				wait, err := r.twinWarming(ctx, svc, twin)
				if err != nil {
					return nil, nil, nil, err
				}
				if wait {
					warming = append(warming, client.ObjectKeyFromObject(twin))
				}
			}
		default:
			record(r.Recorder, obj, corev1.EventTypeWarning, ReasonBackendUnsupported,
				"Service %s is of type %s; only ClusterIP, NodePort and LoadBalancer Services can be backends.", b, svc.Spec.Type)
		}
	}
	return out, used, warming, nil
}

// ensureTwin makes or updates the NodePort twin of a ClusterIP Service and returns it as the
// tenant has it (with its NodePorts); nil when it cannot be made (name too long, or a Service
// of that name that is not ours).
func (r *Reconciler) ensureTwin(ctx context.Context, obj client.Object, svc *corev1.Service) (*corev1.Service, error) {
	name, ok := TwinName(svc.Name)
	if !ok {
		record(r.Recorder, obj, corev1.EventTypeWarning, ReasonTwinConflict,
			"Service %s/%s: %q is not a valid Service name, so its NodePort Service cannot be made; shorten the Service's name.", svc.Namespace, svc.Name, name)
		return nil, nil
	}
	desired := DesiredTwin(svc)
	cur := &corev1.Service{}
	err := r.Tenant.Get(ctx, client.ObjectKeyFromObject(desired), cur)
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		return nil, fmt.Errorf("getting Service %s/%s: %w", desired.Namespace, desired.Name, err)
	case !isTwin(cur):
		record(r.Recorder, obj, corev1.EventTypeWarning, ReasonTwinConflict,
			"Service %s/%s exists and was not made by kubelb, so Service %s cannot be mirrored through it; rename one of them.", cur.Namespace, cur.Name, svc.Name)
		return nil, nil
	case !twinDrifted(cur, desired):
		return cur, nil
	}
	return applyTenantService(ctx, r.Tenant, desired, cur, "NodePort Service")
}

// applyTenantService applies desired, a Service the ccm makes in the tenant cluster, over cur
// (nil when there is none yet) under the ccm's field owner; what names it in errors and logs.
func applyTenantService(ctx context.Context, c client.Client, desired, cur *corev1.Service, what string) (*corev1.Service, error) {
	var existing client.Object
	if cur != nil {
		existing = cur
	}
	if err := ssa.Apply(ctx, c, desired, existing, hubnames.FieldOwnerCCM, ""); err != nil {
		return nil, fmt.Errorf("applying %s %s/%s: %w", what, desired.Namespace, desired.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("applied "+what, "service", client.ObjectKeyFromObject(desired))
	return desired, nil
}

// currentRoute reads the Route named uid from the hub cache (nil: none).
func (r *Reconciler) currentRoute(ctx context.Context, uid types.UID) (*v1alpha1.Route, error) {
	route := &v1alpha1.Route{}
	err := r.Hub.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: string(uid)}, route)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("getting Route %s/%s: %w", r.Namespace, uid, err)
	}
	return route, nil
}

// applyRoute applies the Route when it drifted.
func (r *Reconciler) applyRoute(ctx context.Context, obj client.Object, current, desired *v1alpha1.Route) error {
	if current != nil && current.DeletionTimestamp != nil {
		return nil // someone deletes it; its delete event brings us back to make it anew
	}
	drifted, err := routeDrifted(current, desired)
	if err != nil || !drifted {
		return err
	}
	var existing client.Object
	if current != nil {
		existing = current
	}
	if err := ssa.Apply(ctx, r.Hub, desired, existing, hubnames.FieldOwnerCCM, ""); err != nil {
		record(r.Recorder, obj, corev1.EventTypeWarning, ReasonHubError,
			"Applying Route %s/%s in the management cluster: %v", r.Namespace, desired.Name, err)
		return fmt.Errorf("applying Route %s/%s for %s %s: %w", r.Namespace, desired.Name, r.Kind.String(), client.ObjectKeyFromObject(obj), err)
	}
	if current == nil {
		ctrl.LoggerFrom(ctx).Info("created Route", "route", client.ObjectKeyFromObject(desired))
		record(r.Recorder, obj, corev1.EventTypeNormal, ReasonRouteCreated,
			"Created Route %s/%s in the management cluster.", r.Namespace, desired.Name)
	} else {
		ctrl.LoggerFrom(ctx).Info("updated Route", "route", client.ObjectKeyFromObject(desired))
	}
	return nil
}

// routeDrifted tells whether the Route as it is (nil: none) lacks a label of the desired one
// or has another spec. The ccm owns the whole spec.
func routeDrifted(current, desired *v1alpha1.Route) (bool, error) {
	if current == nil {
		return true, nil
	}
	for k, v := range desired.Labels {
		if current.Labels[k] != v {
			return true, nil
		}
	}
	a, err := json.Marshal(current.Spec)
	if err != nil {
		return false, err
	}
	b, err := json.Marshal(desired.Spec)
	if err != nil {
		return false, err
	}
	return string(a) != string(b), nil
}

// writeStatus copies the hub's status of the Route (nil: none yet) onto the object when it
// differs, and tells the hub's problems (RouteProblems): a Warning Event when they changed,
// and on a Gateway its Programmed condition (WithHubProblems). Both wait while the hub has
// not judged the Route as it is (HubJudged), and so does a Gateway's whole status.
func (r *Reconciler) writeStatus(ctx context.Context, obj client.Object, u map[string]any, route *v1alpha1.Route) error {
	if route == nil {
		return nil
	}
	judged := HubJudged(route)
	if !judged && r.Kind.Name == Gateway.Name {
		return nil // its Programmed condition waits for the hub's verdict (WithHubProblems)
	}
	problems := RouteProblems(route)
	if judged {
		r.reportProblems(obj, problems)
	}
	hub, err := HubStatus(r.Kind, route)
	if err != nil {
		return err
	}
	cur, _ := u["status"].(map[string]any)
	next := cur
	if hub != nil {
		next = MergeStatus(r.Kind, cur, hub)
	}
	if r.Kind.Name == Gateway.Name {
		next = WithHubProblems(next, problems, obj.GetGeneration())
	}
	if hub == nil && r.Kind.Name != Gateway.Name {
		return nil
	}
	_, err = r.patchStatus(ctx, obj, u, next)
	return err
}

// reportProblems records one Warning Event on obj for the hub's problems each time they
// change (never again while they stay; none when there are none).
func (r *Reconciler) reportProblems(obj client.Object, problems []HubProblem) {
	key := client.ObjectKeyFromObject(obj).String()
	reason, note := ProblemNote(problems)
	if note == "" {
		r.problemNotes.Forget(key)
		return
	}
	if r.problemNotes.Changed(key, string(obj.GetUID())+note) {
		record(r.Recorder, obj, corev1.EventTypeWarning, reason, "%s", note)
	}
}

// patchStatus writes status onto the object (u: its unstructured content) with a merge patch
// and optimistic locking, unless it is already there. It returns the object as it is now.
func (r *Reconciler) patchStatus(ctx context.Context, obj client.Object, u map[string]any, status map[string]any) (client.Object, error) {
	next := runtime.DeepCopyJSON(u)
	next["status"] = status
	updated := r.Kind.New()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(next, updated); err != nil {
		return nil, fmt.Errorf("decoding the status of %s %s: %w", r.Kind.String(), client.ObjectKeyFromObject(obj), err)
	}
	normal, err := runtime.DefaultUnstructuredConverter.ToUnstructured(updated)
	if err != nil {
		return nil, err
	}
	if reflect.DeepEqual(normal["status"], u["status"]) {
		return obj, nil
	}
	if err := r.Tenant.Status().Patch(ctx, updated, client.MergeFromWithOptions(obj, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("writing the status of %s %s: %w", r.Kind.String(), client.ObjectKeyFromObject(obj), err)
	}
	return updated, nil
}

// release removes the Route of an object the ccm no longer serves (deleted, or no longer
// ours), the twins nothing else uses, the status it copied, and a finalizer an earlier
// version added. It does not wait for the hub to finish deleting.
func (r *Reconciler) release(ctx context.Context, obj client.Object, u map[string]any) error {
	key := client.ObjectKeyFromObject(obj)
	defer r.managed.Set(key, false)
	r.problemNotes.Forget(key.String())
	current, err := r.currentRoute(ctx, obj.GetUID())
	if err != nil {
		return err
	}
	if err := r.deleteRoutes(ctx, obj, key, ""); err != nil {
		return err
	}
	if err := r.releaseTenant(ctx, obj, u, current); err != nil {
		return err
	}
	if current != nil {
		ctrl.LoggerFrom(ctx).Info("released " + r.Kind.String())
	}
	return nil
}

// releaseTenant is the tenant half of release: the status the ccm copied from the hub's
// Route current (nil: unknown, only what is surely kubelb's goes) and the finalizer an
// earlier version added.
func (r *Reconciler) releaseTenant(ctx context.Context, obj client.Object, u map[string]any, current *v1alpha1.Route) error {
	if obj.GetDeletionTimestamp() == nil {
		// ReleaseStatus takes back only what is still the hub's (Ingress, Gateway) or
		// kubelb's own route parents; patchStatus writes nothing when that is nothing.
		var hub map[string]any
		if current != nil {
			var err error
			if hub, err = HubStatus(r.Kind, current); err != nil {
				return err
			}
		}
		cur, _ := u["status"].(map[string]any)
		var err error
		if obj, err = r.patchStatus(ctx, obj, u, ReleaseStatus(r.Kind, cur, hub)); err != nil {
			return err
		}
	}
	_, err := finalizer.Remove(ctx, r.Tenant, obj, v1alpha1.CleanupFinalizer)
	return err
}

// deleteRoutes deletes the hub Routes mirroring the object key of this kind, except the one
// named keep, and then the twins only they used. obj (may be nil) receives Events about hub
// errors.
func (r *Reconciler) deleteRoutes(ctx context.Context, obj client.Object, key types.NamespacedName, keep types.UID) error {
	list := &v1alpha1.RouteList{}
	if err := r.Hub.List(ctx, list, client.InNamespace(r.Namespace), client.MatchingFields{indexRouteOrigin: originKey(r.Kind.OriginKind(), key)}); err != nil {
		return fmt.Errorf("listing Routes of %s %s: %w", r.Kind.String(), key, err)
	}
	routes := list.Items
	// The Route named by the UID goes even if someone stripped its labels.
	if obj != nil && keep == "" && !slices.ContainsFunc(routes, func(rt v1alpha1.Route) bool { return rt.Name == string(obj.GetUID()) }) {
		if cur, err := r.currentRoute(ctx, obj.GetUID()); err != nil {
			return err
		} else if cur != nil {
			routes = append(routes, *cur)
		}
	}
	for i := range routes {
		rt := &routes[i]
		if rt.Name == string(keep) {
			continue
		}
		if rt.DeletionTimestamp == nil {
			if err := r.Hub.Delete(ctx, rt, client.Preconditions{UID: &rt.UID}); client.IgnoreNotFound(err) != nil {
				if obj != nil {
					record(r.Recorder, obj, corev1.EventTypeWarning, ReasonHubError,
						"Deleting Route %s/%s in the management cluster: %v", r.Namespace, rt.Name, err)
				}
				return fmt.Errorf("deleting Route %s/%s of %s %s: %w", r.Namespace, rt.Name, r.Kind.String(), key, err)
			}
			ctrl.LoggerFrom(ctx).Info("deleted Route", "route", client.ObjectKeyFromObject(rt))
		}
		if err := r.collectTwins(ctx, types.UID(rt.Name), rt, nil); err != nil {
			return err
		}
	}
	if obj != nil && keep == "" {
		return r.collectTwins(ctx, obj.GetUID(), nil, nil)
	}
	return nil
}

// record records an Event about a tenant object.
func record(rec events.EventRecorder, obj client.Object, eventType, reason, note string, args ...any) {
	if rec == nil {
		return
	}
	rec.Eventf(obj, nil, eventType, reason, "Mirror", note, args...)
}
