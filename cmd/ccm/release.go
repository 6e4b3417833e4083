package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/version"
)

// releaseCommand is the subcommand that hands the tenant cluster back (the chart's
// pre-delete hook).
const releaseCommand = "release"

const releaseSummary = "ccm release: hands back, once, everything kubelb's ccm made in this cluster, and exits\n" +
	"(the pre-delete hook of the kubelb-ccm chart). Hub mode: the hub mirrors (LoadBalancers, Routes,\n" +
	"SyncSecrets, Addresses/default) are deleted, the status the ccm wrote, the NodePort twins and\n" +
	"kubelb's finalizers go; a hub that does not answer within --hub-wait is left as it is (deleting\n" +
	"the Tenant there cleans it up) and the tenant side is released anyway. Standalone mode: the\n" +
	"Services' addresses and condition are cleared and the NAT shadow Services deleted.\n" +
	"It takes the ccm's flags (those it does not use are ignored) and these:"

// releaseOptions are the flags of `ccm release`: the ccm's, and the release's own.
type releaseOptions struct {
	*options
	hubWait        time.Duration
	timeout        time.Duration
	stopDeployment secretRef
}

func parseRelease(args []string) (*releaseOptions, *process.FlagSet, error) {
	r := &releaseOptions{}
	o, fs, err := parseWith("ccm "+releaseCommand, args, func(fs *process.FlagSet) {
		fs.DurationVar(&r.hubWait, "hub-wait", ccm.DefaultHubWait, "Release: how long to wait for the management cluster's answer; then only the tenant side is released.")
		fs.DurationVar(&r.timeout, "timeout", 5*time.Minute, "Release: the most the whole release takes (the stop of the ccm included).")
		fs.Var(&r.stopDeployment, "stop-deployment", "Release: the ccm's Deployment (namespace/name), scaled to 0 and waited for until its pods are gone before the release, so that no running ccm adds finalizers back. Empty: none (the ccm must not be running).")
	})
	if err != nil {
		return nil, fs, err
	}
	r.options = o
	if r.hubWait <= 0 || r.timeout <= 0 {
		return nil, fs, errors.New("flags --hub-wait and --timeout must be positive")
	}
	return r, fs, nil
}

func runRelease(r *releaseOptions) error {
	o := r.options
	o.SetupLogging(false)
	log := ctrl.Log.WithName("ccm-release")
	log.Info("starting the release", "version", version.Get().GitVersion, "mode", o.Mode, "clusterName", o.ClusterName,
		"hubWait", r.hubWait.String(), "timeout", r.timeout.String())
	ctx, cancel := context.WithTimeout(ctrl.LoggerInto(ctrl.SetupSignalHandler(), log), r.timeout)
	defer cancel()
	tenantCfg, err := o.RestConfig(o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the tenant cluster's kubeconfig (--kubeconfig): %w", err)
	}
	scheme := process.Scheme()
	if r.stopDeployment.Name != "" {
		c, err := client.New(tenantCfg, client.Options{Scheme: scheme})
		if err != nil {
			return fmt.Errorf("connecting to the tenant cluster: %w", err)
		}
		if err := ccm.StopDeployment(ctx, c, types.NamespacedName(r.stopDeployment.NamespacedName)); err != nil {
			return fmt.Errorf("stopping the ccm (--stop-deployment): %w", err)
		}
	}
	if o.Mode == ccm.ModeStandalone {
		rep, err := ccm.ReleaseStandalone(ctx, tenantCfg, scheme, o.UseLoadBalancerClass)
		log.Info("release done: " + rep.Summary())
		if err != nil {
			return fmt.Errorf("releasing (standalone): %w", err)
		}
		return nil
	}
	hubCfg, err := o.RestConfig(o.HubKubeconfig)
	if err != nil {
		// The hub's credentials are gone: the tenant side is released all the same.
		log.Info("WARNING: no kubeconfig of the management cluster; releasing the tenant side only", "error", err.Error())
		hubCfg = nil
	}
	rep, err := ccm.Release(ctx, tenantCfg, hubCfg, scheme, ccm.ReleaseOptions{Options: o.Options, HubWait: r.hubWait})
	log.Info("release done: "+rep.Summary(), "services", rep.Services, "secrets", rep.Secrets, "layer7", rep.Layer7,
		"twins", rep.Twins, "leftOnHub", rep.LeftOnHub)
	if err != nil {
		return fmt.Errorf("releasing: %w", err)
	}
	return nil
}
