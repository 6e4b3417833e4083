package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	"kubelb.dev/kubelb/internal/envoydrain"
	"kubelb.dev/kubelb/internal/manager/envoyfleet"
	"kubelb.dev/kubelb/internal/process"
)

const shutdownManagerSummary = "kubelb " + envoydrain.Command + ": the shutdown manager sidecar of the Envoy fleets' pods. It drains\n" +
	"Envoy through its admin interface when asked on its control socket (\"kubelb " + envoydrain.Command + " " + envoydrain.DrainCommand + "\",\n" +
	"the sidecar's preStop hook) and answers GET " + envoydrain.DrainedPath + " on --listen-address once the drain ended (Envoy's preStop hook)."

const drainSummary = "kubelb " + envoydrain.Command + " " + envoydrain.DrainCommand + ": asks the shutdown manager of this pod to drain Envoy and\n" +
	"returns when the drain ended (the shutdown manager container's preStop hook)."

// shutdownManagerOptions are the flags of "kubelb envoy-shutdown-manager" and of its drain
// subcommand.
type shutdownManagerOptions struct {
	// drain: the "drain" subcommand (request a drain) rather than the shutdown manager.
	drain         bool
	adminAddress  process.Address
	listenAddress process.Address
	controlSocket string
	minDrain      time.Duration
	drainTimeout  time.Duration
}

func parseShutdownManager(args []string) (*shutdownManagerOptions, *process.FlagSet, error) {
	o := &shutdownManagerOptions{}
	if len(args) > 0 && args[0] == envoydrain.DrainCommand {
		o.drain = true
		fs := process.NewFlagSet("kubelb " + envoydrain.Command + " " + envoydrain.DrainCommand)
		fs.StringVar(&o.controlSocket, "control-socket", envoydrain.DefaultControlSocket, "Unix socket of the shutdown manager to ask (@name: an abstract socket).")
		return o, fs, fs.Parse(args[1:])
	}
	fs := process.NewFlagSet("kubelb " + envoydrain.Command)
	o.adminAddress.Value = fmt.Sprintf("127.0.0.1:%d", envoyfleet.AdminPort)
	o.listenAddress.Value = fmt.Sprintf(":%d", envoyfleet.ShutdownManagerPort)
	fs.Var(&o.adminAddress, "admin-address", "host:port of Envoy's admin interface, which is drained.")
	fs.Var(&o.listenAddress, "listen-address", "Address of GET "+envoydrain.DrainedPath+", which answers once the drain ended (Envoy's preStop hook; the kubelet calls it on the pod's address). It cannot start a drain.")
	fs.StringVar(&o.controlSocket, "control-socket", envoydrain.DefaultControlSocket, "Unix socket the drain is requested on (@name: an abstract socket, reachable only from inside the pod's network namespace).")
	fs.DurationVar(&o.minDrain, "min-drain-duration", envoyfleet.DefaultMinDrainDuration, "Least time a drain lasts (Config envoyProxy.gracefulShutdown.minDrainDuration).")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", envoyfleet.DefaultDrainTimeout, "Most time a drain lasts, from the drain request on (Config envoyProxy.gracefulShutdown.drainTimeout).")
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	if o.adminAddress.Value == "" || o.listenAddress.Value == "" {
		return nil, fs, fmt.Errorf("flags --admin-address and --listen-address must not be empty")
	}
	if o.minDrain < 0 || o.drainTimeout < 0 {
		return nil, fs, fmt.Errorf("flags --min-drain-duration and --drain-timeout must not be negative")
	}
	return o, fs, nil
}

func runShutdownManager(o *shutdownManagerOptions) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if o.drain {
		answer, err := envoydrain.RequestDrain(ctx, o.controlSocket)
		if err != nil {
			return err
		}
		fmt.Println(answer)
		return nil
	}
	log := crzap.New().WithName("shutdown-manager")
	m, err := envoydrain.Listen(envoydrain.ManagerOptions{
		Drain: envoydrain.Options{
			AdminAddress: o.adminAddress.Value, MinDuration: o.minDrain, Timeout: o.drainTimeout, Log: log,
		},
		WaitAddress:   o.listenAddress.Value,
		ControlSocket: o.controlSocket,
		Log:           log,
	})
	if err != nil {
		return err
	}
	return m.Serve(ctx)
}

// shutdownManagerMain runs "kubelb envoy-shutdown-manager [drain] ...", args after its name.
func shutdownManagerMain(args []string) {
	summary := shutdownManagerSummary
	if len(args) > 0 && args[0] == envoydrain.DrainCommand {
		summary = drainSummary
	}
	process.MainArgs("kubelb "+envoydrain.Command, summary, args, parseShutdownManager, runShutdownManager)
}
