package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strconv"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"kubelb.dev/kubelb/internal/ipam"
	"kubelb.dev/kubelb/internal/logging"
	"kubelb.dev/kubelb/internal/manager/admission"
	"kubelb.dev/kubelb/internal/manager/envoycp"
	"kubelb.dev/kubelb/internal/manager/envoyfleet"
	"kubelb.dev/kubelb/internal/manager/hubcache"
	"kubelb.dev/kubelb/internal/manager/loadbalancer"
	"kubelb.dev/kubelb/internal/manager/oidckeys"
	"kubelb.dev/kubelb/internal/manager/perobject"
	"kubelb.dev/kubelb/internal/manager/route"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/manager/syncsecret"
	"kubelb.dev/kubelb/internal/manager/tenant"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/nodeip"
	"kubelb.dev/kubelb/internal/pki/store"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/version"
	"kubelb.dev/kubelb/internal/xds"
	xdsbootstrap "kubelb.dev/kubelb/internal/xds/bootstrap"
)

// leaderElectionID is the name of the manager's lease in --namespace.
const leaderElectionID = "kubelb-manager.kubelb.k8c.io"

func run(o *options) error {
	o.SetupLogging(o.Debug)
	log := ctrl.Log.WithName("kubelb")
	process.SetMemoryLimit(log)
	log.Info("starting", "version", version.Get().GitVersion, "namespace", o.Namespace, "addressProvider", o.addressProvider.Value)
	if o.notYetWarning != "" {
		logging.Warn(log, o.notYetWarning)
	}
	if o.deprecatedWarning != "" {
		logging.Warn(log, o.deprecatedWarning)
	}
	if o.providerWarning != "" {
		logging.Warn(log, o.providerWarning)
	}

	cfg, err := o.RestConfig(o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the management cluster's kubeconfig (--kubeconfig): %w", err)
	}
	metrics.RegisterManager()
	mopts := o.ManagerOptions(process.Scheme(), leaderElectionID, o.Namespace)
	mopts.Cache.ByObject = hubcache.CacheByObject() // Secrets: only kubelb's, by label
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return fmt.Errorf("creating the controller manager: %w", err)
	}

	// Every replica serves xDS and keeps snapshots (Envoy connects to any of them); the
	// controllers that write to the API server run on the leader only.
	// The xDS server speaks only mutual TLS: the CA is kept in a Secret of the manager's
	// namespace (made by the first replica that finds none); each replica issues itself a server
	// certificate for the xDS host and renews it in memory.
	xdsHost, _, err := net.SplitHostPort(o.EnvoyXDSAddress)
	if err != nil {
		return fmt.Errorf("reading the xDS host of %q: %w", o.EnvoyXDSAddress, err)
	}
	authority := store.NewAuthority(mgr.GetClient(), mgr.GetAPIReader(), o.Namespace, xdsHost, ctrl.Log.WithName("xds-ca"))
	if err := mgr.Add(authority); err != nil {
		return fmt.Errorf("adding the xDS CA: %w", err)
	}
	if o.webhookAddr != "" {
		if err := setupWebhook(mgr, o); err != nil {
			return fmt.Errorf("setting up the admission webhook (--admission-webhook-address): %w", err)
		}
	}
	srv := xds.NewServer(ctrl.Log.WithName("xds"), authority.ServerTLS())
	if err := srv.SetLimits(o.xdsLimits); err != nil {
		return fmt.Errorf("setting the xDS limits (--xds-*): %w", err)
	}
	if err := mgr.Add(srv.Runnable(o.XDSListenAddress)); err != nil {
		return fmt.Errorf("adding the xDS server (--listen-address): %w", err)
	}
	// Envoy NACKs and health reports (HDS) reach this replica's recorder, which writes them
	// into the tenant's TenantState; the leader's status writer joins them with the
	// translation reports.
	replica, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("reading the host name for the replica identity: %w", err)
	}
	recorder := status.NewRecorder(mgr.GetClient(), mgr.GetLogger(), replica)
	srv.OnRejection(recorder.Hear)
	srv.OnHealth(recorder.HearHealth)
	if err := mgr.Add(recorder); err != nil {
		return fmt.Errorf("adding the xDS rejection recorder: %w", err)
	}
	store := status.NewStore()
	// The tenants' quota verdicts, one source for the planner (ports and hub Services), the
	// Envoy control plane and the Tenant controller: computed once per change of a tenant.
	verdicts := quota.NewStore(mgr.GetCache(), mgr.GetClient())
	if err := envoycp.SetupWithManager(mgr, srv, store, verdicts, o.Namespace, translate.Options{ListenerAddress: o.EnvoyListenerAddress, ListenerAddressIPv6: o.EnvoyListenerAddressIPv6}); err != nil {
		return fmt.Errorf("setting up the Envoy control plane: %w", err)
	}
	// The one writer of LoadBalancer and Route status, for the status writer and the
	// LoadBalancer and Route controllers (all leader only).
	sink := status.NewSink(mgr.GetClient())
	if err := status.SetupWriterWithManager(mgr, store, status.WithEndpoints(srv.ClusterEndpoints), status.WithSink(sink), status.WithApplied(srv.Applied)); err != nil {
		return fmt.Errorf("setting up the status writer: %w", err)
	}
	if err := tenant.SetupWithManager(mgr, tenant.Options{
		Namespace: o.Namespace, HubAPIServerURL: o.TenantKubeconfigServer, TokenTTL: o.TenantTokenTTL,
		NetworkPolicy: o.networkPolicy, Verdicts: verdicts,
	}); err != nil {
		return fmt.Errorf("setting up the Tenant controller: %w", err)
	}
	// One listener port allocator for the hub, rebuilt from the hub Services on first use.
	ports := loadbalancer.NewSharedPorts(mgr, portalloc.Range{Min: int32(o.PortRangeMin), Max: int32(o.PortRangeMax)})
	if err := ports.Range().Validate(); err != nil {
		return fmt.Errorf("reading --envoy-port-range: %w", err)
	}
	// One of each for both controllers: the port allocator, the status Sink, the tenants'
	// planner (each LoadBalancer's and Route's quota verdict and listener ports, each
	// tenant's Ingress Service; leader only), the tenants waiting for free ports, the
	// tenants' Ingress Service problems.
	shared, err := perobject.Shared{Ports: ports, Sink: sink, Verdicts: verdicts}.WithDefaults(mgr, o.Namespace, route.DefaultMaxConcurrentReconciles)
	if err != nil {
		return fmt.Errorf("setting up the tenants' planner: %w", err)
	}
	if err := loadbalancer.SetupWithManager(mgr, loadbalancer.Options{Namespace: o.Namespace, Status: store, Shared: shared}); err != nil {
		return fmt.Errorf("setting up the LoadBalancer controller: %w", err)
	}
	if err := route.SetupWithManager(mgr, route.Options{Namespace: o.Namespace, Shared: shared}); err != nil {
		return fmt.Errorf("setting up the Route controller: %w", err)
	}
	if err := syncsecret.SetupWithManager(mgr, syncsecret.Options{Namespace: o.Namespace}); err != nil {
		return fmt.Errorf("setting up the SyncSecret controller: %w", err)
	}
	// The keys of the tenants' OIDC session cookies, kept only on the hub.
	if err := oidckeys.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the OIDC cookie key controller: %w", err)
	}
	tenantSettings := settings.Reader{Client: mgr.GetClient(), ManagerNamespace: o.Namespace}
	if o.addressProvider.Value == addressProviderNodeIP {
		if err := nodeip.Setup(mgr, nodeip.HubOptions(tenantSettings.NodeSet, o.addressProviderClass, o.reservedPorts.Ranges, o.nodeIPNAT)); err != nil {
			return fmt.Errorf("setting up the node-IP mode (--address-provider=node-ip): %w", err)
		}
	}
	if o.addressProvider.Value == addressProviderIPAM {
		if err := ipam.Setup(mgr, ipam.HubOptions(tenantSettings.AddressPool, o.addressProviderClass)); err != nil {
			return fmt.Errorf("setting up the address pools (--address-provider=ipam): %w", err)
		}
	}
	if err := envoyfleet.SetupWithManager(mgr, envoyfleet.Options{
		Namespace: o.Namespace, EnvoyImage: o.EnvoyImage, ShutdownManagerImage: o.EnvoyShutdownManagerImage, XDSAddress: o.EnvoyXDSAddress,
		XDSProtocol: xdsbootstrap.Protocol(o.EnvoyXDSProtocol),
	}); err != nil {
		return fmt.Errorf("setting up the Envoy fleet controller: %w", err)
	}
	return process.Run(mgr)
}

// setupWebhook serves the admission webhook on --admission-webhook-address (every replica),
// with a certificate for --admission-webhook-host from the manager's CA, and keeps the CA
// bundle of its ValidatingWebhookConfiguration (the leader).
func setupWebhook(mgr ctrl.Manager, o *options) error {
	host, port, err := net.SplitHostPort(o.webhookAddr)
	if err != nil {
		return fmt.Errorf("reading --admission-webhook-address %q: %w", o.webhookAddr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("reading the port of --admission-webhook-address %q: %w", o.webhookAddr, err)
	}
	serving := store.NewServingAuthority(mgr.GetClient(), mgr.GetAPIReader(), o.Namespace, o.webhookHost, "admission webhook", ctrl.Log.WithName("webhook-ca"))
	if err := mgr.Add(serving); err != nil {
		return fmt.Errorf("adding the webhook CA: %w", err)
	}
	ledger, err := admission.NewLedger(context.Background(), mgr.GetCache())
	if err != nil {
		return fmt.Errorf("starting the admission ledger: %w", err)
	}
	srv := webhook.NewServer(webhook.Options{Host: host, Port: p, TLSOpts: []func(*tls.Config){func(c *tls.Config) {
		c.GetCertificate = serving.GetCertificate
		c.MinVersion = tls.VersionTLS12
	}}})
	srv.Register(admission.Path, &webhook.Admission{Handler: admission.NewHandler(mgr.GetClient(), o.Namespace, ledger, mgr.GetScheme())})
	if err := mgr.Add(srv); err != nil {
		return fmt.Errorf("adding the webhook server: %w", err)
	}
	return mgr.Add(&admission.CABundle{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Name: admission.ConfigurationName,
		CA: serving.CA, Interval: store.RefreshInterval, Log: ctrl.Log.WithName("webhook-ca"),
	})
}
