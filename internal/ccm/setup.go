package ccm

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ccm/secrets"
	ccmsource "kubelb.dev/kubelb/internal/ccm/source"
	"kubelb.dev/kubelb/internal/hubschema"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/ssa"
)

// EventSource is the name under which the ccm records Events.
const EventSource = "kubelb-ccm"

// hubProbeInterval is how often the ccm asks the hub something while it has nothing to
// write, so that CCMClusterConnected also tells the truth on a quiet system.
const hubProbeInterval = 10 * time.Second

// hubProbeTimeout bounds one probe: a hub behind a partition (a black hole: nothing
// answers, nothing is refused) would otherwise hold the request until the HTTP/2 health
// check gives up on the connection (45 s), and the metric would say "connected" all along.
// A list of at most one TenantState answers in milliseconds.
const hubProbeTimeout = 5 * time.Second

// RBAC the ccm needs on the hub, in the tenant's namespace only (the Role the manager makes for
// each Tenant; deliberately not a +kubebuilder:rbac marker, which would land in the ccm's
// tenant-side ClusterRole):
//
//	kubelb.k8c.io loadbalancers: get list watch create update patch delete
//	kubelb.k8c.io addresses:     get list watch create update patch delete
//	kubelb.k8c.io tenantstates:  get list watch
//	kubelb.k8c.io routes:        get list watch create update patch delete
//	kubelb.k8c.io syncsecrets:   get list watch create update patch delete

// Setup adds the ccm's controllers to mgr (a manager on the tenant cluster); hub is the
// management cluster, whose cache covers only namespace opts.ClusterName (the tenant's name
// may be given without the tenant- prefix, see HubNamespace). With EnableCloudProvider off
// the Services are mirrored with the addresses another implementation gave them
// (ExternalLoadBalancer), without the node controller and without copying status; the Layer 7
// controllers (package source) follow their own options, and the Secret synchronizer
// (internal/ccm/secrets) runs whenever Ingresses, the Gateway API or labelled Secrets are
// enabled.
func Setup(mgr ctrl.Manager, hub cluster.Cluster, opts Options) error {
	if opts.ClusterName == "" {
		return errors.New("the tenant's namespace on the hub (ClusterName) is required")
	}
	opts.ClusterName = HubNamespace(opts.ClusterName)
	if opts.NodeAddressType == "" {
		opts.NodeAddressType = NodeAddressExternalIP
	}
	if _, ok := addressFallback[opts.NodeAddressType]; !ok {
		return fmt.Errorf("node address type %q is not one of %s, %s, %s", opts.NodeAddressType,
			NodeAddressExternalIP, NodeAddressInternalIP, NodeAddressHostname)
	}
	if err := mgr.Add(&hubProbe{reader: hubReader{hub.GetAPIReader()}, namespace: opts.ClusterName}); err != nil {
		return fmt.Errorf("adding the hub probe: %w", err)
	}
	schema, err := hubschema.NewLoader(hub.GetConfig(), mgr.GetLogger().WithName("hub-schema"))
	if err != nil {
		return err
	}
	if err := mgr.Add(schema); err != nil {
		return fmt.Errorf("adding the hub schema loader: %w", err)
	}
	hubc := newHubClient(hub.GetClient(), schema, mgr.GetLogger().WithName("hub"))
	so := sourceOptions(opts)
	so.HubSchema = schema
	if err := ccmsource.Setup(mgr, hub, hubc, so); err != nil {
		return fmt.Errorf("setting up the Layer 7 controllers: %w", err)
	}
	if err := secrets.Setup(mgr, hub, hubc, opts.secretOptions()); err != nil {
		return fmt.Errorf("setting up the Secret synchronizer: %w", err)
	}
	if err := hub.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.LoadBalancer{}, indexOrigin, originIndex); err != nil {
		return fmt.Errorf("indexing hub LoadBalancers: %w", err)
	}
	if opts.EnableCloudProvider {
		// Without it the endpoints are another implementation's addresses, not the nodes.
		if err := setupNodeController(mgr, hub, hubc, opts); err != nil {
			return fmt.Errorf("setting up the node controller: %w", err)
		}
	}
	if err := setupServiceControllers(mgr, hub, hubc, schema, opts); err != nil {
		return fmt.Errorf("setting up the Service controllers: %w", err)
	}
	return nil
}

// sourceOptions are the options of the Layer 7 controllers.
func sourceOptions(o Options) ccmsource.Options {
	return ccmsource.Options{
		Namespace:       o.ClusterName,
		EventSource:     EventSource,
		Ingress:         !o.DisableIngressController,
		UseIngressClass: o.UseIngressClass,
		GatewayAPI:      o.EnableGatewayAPI,
		UseGatewayClass: o.UseGatewayClass,
		Disabled: map[string]bool{
			ccmsource.Gateway.Name:   o.DisableGatewayController,
			ccmsource.HTTPRoute.Name: o.DisableHTTPRouteController,
			ccmsource.GRPCRoute.Name: o.DisableGRPCRouteController,
			ccmsource.TLSRoute.Name:  o.DisableTLSRouteController,
			ccmsource.TCPRoute.Name:  o.DisableTCPRouteController,
			ccmsource.UDPRoute.Name:  o.DisableUDPRouteController,
		},
		GatewayServices:         !o.DisableGatewayServices,
		InstallCRDs:             o.InstallGatewayAPICRDs,
		CRDsChannel:             o.GatewayAPICRDsChannel,
		MaxConcurrentReconciles: o.workers(),
	}
}

// setupServiceControllers registers the mirror controller and the status controller.
func setupServiceControllers(mgr ctrl.Manager, hub cluster.Cluster, hubc client.Client, schema *hubschema.Loader, opts Options) error {
	mirror := &ServiceReconciler{
		Tenant:    mgr.GetClient(),
		Hub:       hubc,
		Recorder:  mgr.GetEventRecorder(EventSource),
		Namespace: opts.ClusterName,
		UseClass:  opts.UseLoadBalancerClass,
		External:  !opts.EnableCloudProvider,
		warn:      newWarnOnce(),
		managed:   metrics.NewManagedSet(metrics.CCMManagedServices),

		LegacyFieldManager: ssa.LegacyFieldManager(hub.GetConfig()),
		HubSchema:          schema,
	}
	lbToService := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, lb *v1alpha1.LoadBalancer) []reconcile.Request {
		if key, ok := originOf(lb); ok {
			return []reconcile.Request{{NamespacedName: key}}
		}
		return nil
	})
	// A change of the hub's verdict re-reconciles every LoadBalancer Service (only then: the
	// manager may refresh TenantState often).
	tenantStateToServices := handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, _ *v1alpha1.TenantState) []reconcile.Request {
		list := &corev1.ServiceList{}
		if err := mgr.GetClient().List(ctx, list); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing Services after a TenantState change")
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			if serviceRelevant(&list.Items[i]) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return out
	})
	workers := controller.Options{MaxConcurrentReconciles: opts.workers()}

	err := builder.ControllerManagedBy(mgr).
		Named("ccm-service").
		For(&corev1.Service{}, builder.WithPredicates(mirrorPredicate(mirror.External))).
		WatchesRawSource(source.Kind(hub.GetCache(), &v1alpha1.LoadBalancer{}, lbToService,
			hubLoadBalancerChanged())).
		WatchesRawSource(source.Kind(hub.GetCache(), &v1alpha1.TenantState{}, tenantStateToServices,
			hubVerdictChanged)).
		WithOptions(workers).
		Complete(mirror)
	if err != nil {
		return err
	}
	if mirror.External {
		// The Services' status is the other implementation's to write.
		return nil
	}

	status := NewStatusReconciler(mgr.GetClient(), hub.GetClient(), mgr.GetEventRecorder(EventSource), opts.ClusterName, opts.UseLoadBalancerClass)
	return builder.ControllerManagedBy(mgr).
		Named("ccm-service-status").
		For(&corev1.Service{}, builder.WithPredicates(statusServicePredicate)).
		WatchesRawSource(source.Kind(hub.GetCache(), &v1alpha1.LoadBalancer{}, lbToService,
			hubStatusChanged)).
		WithOptions(workers).
		Complete(status)
}

// hubProbe asks the hub a cheap question every hubProbeInterval so that CCMClusterConnected
// reflects the connection even when the ccm has nothing to write. It runs on every replica.
type hubProbe struct {
	reader    client.Reader
	namespace string
}

// NeedLeaderElection is false: connectivity matters on standby replicas too.
func (p *hubProbe) NeedLeaderElection() bool { return false }

// probe asks the hub once, within hubProbeTimeout.
func (p *hubProbe) probe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, hubProbeTimeout)
	defer cancel()
	_ = p.reader.List(ctx, &v1alpha1.TenantStateList{}, client.InNamespace(p.namespace), client.Limit(1))
}

// Start probes until ctx ends.
func (p *hubProbe) Start(ctx context.Context) error {
	t := time.NewTicker(hubProbeInterval)
	defer t.Stop()
	for {
		if ctx.Err() != nil {
			return nil
		}
		// The answer is recorded by hubReader; errors show in the metrics only.
		p.probe(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
