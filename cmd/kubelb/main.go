// Command kubelb is the kubelb manager: it runs in the management cluster, allocates ports,
// serves Envoy xDS, deploys the per-tenant Envoy fleets and writes status back.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"kubelb.dev/kubelb/internal/app"
	"kubelb.dev/kubelb/internal/manager"
)

const summary = "kubelb: the kubelb manager for the management cluster; allocates ports, serves Envoy xDS,\nruns the per-tenant Envoy fleets and writes status back to tenants."

type options struct {
	app.Common
	manager.Options
	xdsAddr app.Address
}

func parse(args []string) (*options, *app.FlagSet, error) {
	o := &options{}
	fs := app.NewFlagSet("kubelb")
	o.Bind(fs, ":9443")
	o.xdsAddr.Value = ":8001"
	ns := os.Getenv("NAMESPACE")
	if ns == "" {
		ns = "kubelb"
	}
	fs.Var(&o.xdsAddr, "listen-address", "Address the Envoy xDS gRPC server listens on.")
	fs.StringVar(&o.Namespace, "namespace", ns, "Namespace the manager runs in and reads Config \"default\" from (env NAMESPACE).")
	fs.BoolVar(&o.EnableGatewayAPI, "enable-gateway-api", false, "Run the Gateway API controllers.")
	fs.BoolVar(&o.Debug, "debug", false, "Log at debug level.")
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	o.XDSListenAddress = o.xdsAddr.Value
	if o.Namespace == "" {
		return nil, fs, fmt.Errorf("flag --namespace must not be empty")
	}
	return o, fs, o.Validate()
}

func main() {
	o, fs, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage(os.Stdout, summary)
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelb: %v\n", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "kubelb: %v\n", err)
		os.Exit(1)
	}
}
