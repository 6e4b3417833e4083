package main

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/ccm/hubtoken"
	ccmsource "kubelb.dev/kubelb/internal/ccm/source"
	"kubelb.dev/kubelb/internal/ipam"
	"kubelb.dev/kubelb/internal/logging"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/version"
)

// leaderElectionID is the name of the ccm's lease in the tenant cluster.
const leaderElectionID = "kubelb-ccm.kubelb.k8c.io"

func run(o *options) error {
	o.SetupLogging(false)
	log := ctrl.Log.WithName("ccm")
	process.SetMemoryLimit(log)
	log.Info("starting", "version", version.Get().GitVersion, "mode", o.Mode, "addressProvider", o.addressProvider.Value, "clusterName", o.ClusterName)
	if o.notYetWarning != "" {
		logging.Warn(log, o.notYetWarning)
	}
	if o.deprecatedWarning != "" {
		logging.Warn(log, o.deprecatedWarning)
	}
	if o.modeWarning != "" {
		logging.Warn(log, o.modeWarning)
	}
	if o.providerWarning != "" {
		logging.Warn(log, o.providerWarning)
	}
	if o.Mode == ccm.ModeStandalone {
		return runStandalone(o)
	}

	tenantCfg, err := o.RestConfig(o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the tenant cluster's kubeconfig (--kubeconfig): %w", err)
	}
	hubCfg, err := o.RestConfig(o.HubKubeconfig)
	if err != nil {
		return fmt.Errorf("loading the management cluster's kubeconfig (--kubelb-kubeconfig): %w", err)
	}
	scheme := process.Scheme()
	metrics.RegisterCCM()
	mopts := o.ManagerOptions(scheme, leaderElectionID, o.LeaderElectionNamespace)
	mopts.Cache.ByObject = ccmsource.CacheByObject() // not the slices of Services with a selector
	mgr, err := ctrl.NewManager(tenantCfg, mopts)
	if err != nil {
		return fmt.Errorf("creating the controller manager: %w", err)
	}
	// The hub token expires; every hub client sends the one the renewer keeps fresh.
	hubCfg, err = hubtoken.Setup(mgr, hubCfg, hubtoken.Options{
		Secret:    o.HubKubeconfigSecret.NamespacedName,
		SecretKey: o.HubKubeconfigSecretKey,
	})
	if err != nil {
		return fmt.Errorf("setting up the hub token renewal (--kubelb-kubeconfig): %w", err)
	}
	// The ccm sees only its own namespace of the hub: its credentials allow nothing more.
	hub, err := cluster.New(hubCfg, func(co *cluster.Options) {
		co.Scheme = scheme
		co.Cache.DefaultNamespaces = map[string]cache.Config{o.ClusterName: {}}
	})
	if err != nil {
		return fmt.Errorf("connecting to the management cluster: %w", err)
	}
	if err := mgr.Add(hub); err != nil {
		return fmt.Errorf("adding the management cluster: %w", err)
	}
	if err := ccm.Setup(mgr, hub, o.Options); err != nil {
		return fmt.Errorf("setting up the controllers: %w", err)
	}
	return process.Run(mgr)
}

// standaloneIPAM are the address pools' options in standalone mode: the Services the ccm
// owns (ccm.ServiceClass), each taking from the pool its annotation kubelb.k8c.io/address-pool
// names (none: the default pool).
func standaloneIPAM(o *options) ipam.Options {
	return ipam.Options{
		Name:    "ccm-ipam",
		Owns:    func(svc *corev1.Service) bool { return ccm.ServiceClass(svc, o.UseLoadBalancerClass) == ccm.OurClass },
		Pool:    ipam.PoolFromAnnotation,
		Metrics: metrics.CCMIPAM,
	}
}

// runStandalone runs the node-IP mode or the address pools: a manager on the cluster itself,
// no hub.
func runStandalone(o *options) error {
	cfg, err := o.RestConfig(o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the cluster's kubeconfig (--kubeconfig): %w", err)
	}
	metrics.RegisterCCM()
	mgr, err := ctrl.NewManager(cfg, o.ManagerOptions(process.Scheme(), leaderElectionID, o.LeaderElectionNamespace))
	if err != nil {
		return fmt.Errorf("creating the controller manager: %w", err)
	}
	if o.addressProvider.Value == addressProviderIPAM {
		if err := ipam.Setup(mgr, standaloneIPAM(o)); err != nil {
			return fmt.Errorf("setting up the address pools (--address-provider=ipam): %w", err)
		}
		return process.Run(mgr)
	}
	if err := ccm.SetupStandalone(mgr, o.Options); err != nil {
		return fmt.Errorf("setting up the node-IP controller: %w", err)
	}
	return process.Run(mgr)
}
