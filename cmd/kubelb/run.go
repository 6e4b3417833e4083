package main

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"kubelb.dev/kubelb/internal/app"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/version"
)

// leaderElectionID is the name of the manager's lease in --namespace.
const leaderElectionID = "kubelb-manager.kubelb.k8c.io"

func run(o *options) error {
	o.SetupLogging(o.Debug)
	log := ctrl.Log.WithName("kubelb")
	log.Info("starting", "version", version.Get().GitVersion, "namespace", o.Namespace)

	cfg, err := o.RestConfig(o.Kubeconfig)
	if err != nil {
		return err
	}
	metrics.RegisterManager()
	mgr, err := ctrl.NewManager(cfg, o.ManagerOptions(app.Scheme(), leaderElectionID, o.Namespace))
	if err != nil {
		return err
	}
	if err := app.AddProbes(mgr); err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}
