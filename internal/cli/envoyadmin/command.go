package envoyadmin

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/cli"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/process"
)

// Session is an open admin interface of one Envoy of a tenant's fleet, with the tenant's
// names.
type Session struct {
	Admin Admin
	Names *Names
	// Pod is the Envoy pod reached, "namespace/name".
	Pod  string
	Stop func()
}

// TenantNamespace is the hub namespace of a tenant given by name ("a") or namespace
// ("tenant-a").
func TenantNamespace(tenant string) string {
	if hubnames.IsTenantNamespace(tenant) {
		return tenant
	}
	return hubnames.TenantNamespace(tenant)
}

// Open reaches a Ready Envoy of the tenant's fleet on the hub o selects, and reads the
// tenant's LoadBalancers and Routes to name what Envoy holds.
func Open(ctx context.Context, o *cli.Options, tenant string) (*Session, error) {
	cfg, err := o.RESTConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: process.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("connecting to the hub: %w", err)
	}
	return OpenNamespace(ctx, cfg, c, TenantNamespace(tenant))
}

// OpenNamespace is Open for the tenant namespace ns of the hub of cfg and c.
func OpenNamespace(ctx context.Context, cfg *rest.Config, c client.Reader, ns string) (*Session, error) {
	names, err := TenantNames(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	pod, err := PickPod(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	admin, stop, err := Forward(cfg, pod)
	if err != nil {
		return nil, err
	}
	return &Session{Admin: admin, Names: names, Pod: pod.Namespace + "/" + pod.Name, Stop: stop}, nil
}

// TenantNames reads the LoadBalancers and Routes of a tenant namespace into Names.
func TenantNames(ctx context.Context, c client.Reader, namespace string) (*Names, error) {
	lbs, routes := &v1alpha1.LoadBalancerList{}, &v1alpha1.RouteList{}
	for _, l := range []client.ObjectList{lbs, routes} {
		if err := c.List(ctx, l, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("listing the objects of %s on the hub: %w", namespace, err)
		}
	}
	return NewNames(lbs.Items, routes.Items), nil
}

// Command is `kubectl kubelb envoy config|clusters|stats <tenant>`.
func Command(o *cli.Options) *cobra.Command {
	c := &cobra.Command{
		Use:   "envoy",
		Short: "Show what an Envoy of a tenant's fleet holds: its configuration, clusters and stats (hub kubeconfig)",
		Long: "envoy reaches a Ready Envoy pod of the tenant's fleet on the hub (a port-forward through\n" +
			"the API server to its admin interface, 127.0.0.1:9901 in the pod; needs pods/portforward\n" +
			"in the tenant namespace) and prints what it holds, Envoy's names followed by the tenant\n" +
			"objects they serve.",
	}
	var raw bool
	var filter string
	run := func(use, short string, do func(ctx context.Context, s *Session, out io.Writer) error) *cobra.Command {
		return &cobra.Command{
			Use: use + " TENANT", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				s, err := Open(cmd.Context(), o, args[0])
				if err != nil {
					return err
				}
				defer s.Stop()
				fmt.Fprintf(o.Streams.ErrOut, "Envoy pod %s\n", s.Pod)
				return do(cmd.Context(), s, o.Streams.Out)
			},
		}
	}
	config := run("config", "List the listeners, clusters and route configurations (--raw: the whole /config_dump)",
		func(ctx context.Context, s *Session, out io.Writer) error {
			return Config(ctx, s.Admin, s.Names, raw, out)
		})
	config.Flags().BoolVar(&raw, "raw", false, "print Envoy's whole /config_dump (JSON; Envoy redacts secrets)")
	clusters := run("clusters", "List the clusters and the health of each endpoint; exit 1 when one is unhealthy",
		func(ctx context.Context, s *Session, out io.Writer) error {
			bad, err := Clusters(ctx, s.Admin, s.Names, out)
			if err == nil && bad > 0 {
				err = fmt.Errorf("%d endpoints are unhealthy or missing", bad)
			}
			return err
		})
	stats := run("stats", "Print Envoy's stats (--filter: those whose name contains a string)",
		func(ctx context.Context, s *Session, out io.Writer) error {
			return Stats(ctx, s.Admin, s.Names, filter, out)
		})
	stats.Flags().StringVar(&filter, "filter", "", "only the stats whose name contains this string")
	c.AddCommand(config, clusters, stats)
	return c
}
