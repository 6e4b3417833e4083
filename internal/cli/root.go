// Package cli is `kubectl kubelb`, the kubectl plugin of kubelb (binary kubectl-kubelb): it
// tells each user why something does not work, with the credentials that user really has —
// the platform team's hub kubeconfig, a tenant admin's tenant kubeconfig (and the ccm's hub
// kubeconfig), an app team's tenant kubeconfig. Each command lives in its own package under
// internal/cli and is listed in cmd/kubectl-kubelb.
package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"kubelb.dev/kubelb/internal/version"
)

// Streams are the command's input and outputs.
type Streams struct {
	In          io.Reader
	Out, ErrOut io.Writer
}

// Options are what every command shares: the streams, the cluster the user's kubeconfig
// selects (--kubeconfig, --context, --namespace, as kubectl's; $KUBECONFIG), and the hub
// kubeconfig of tenant-side commands.
type Options struct {
	Streams Streams
	// Kubeconfig, Context and Namespace select the cluster the user works with: the hub for
	// the platform team, the tenant cluster for a tenant admin or an app team.
	Kubeconfig, Context, Namespace string
	// HubKubeconfig is the hub kubeconfig of tenant-side commands (check tenant, status);
	// empty: the ccm's, read from its Secret in the tenant cluster when the user may.
	HubKubeconfig string
}

// ClientConfig is the kubeconfig the flags select (kubectl's loading rules).
func (o *Options) ClientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context})
}

// RESTConfig is the REST configuration of the selected cluster.
func (o *Options) RESTConfig() (*rest.Config, error) {
	cfg, err := o.ClientConfig().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	return cfg, nil
}

// CurrentNamespace is --namespace, else the kubeconfig context's namespace, else "default".
func (o *Options) CurrentNamespace() (string, error) {
	if o.Namespace != "" {
		return o.Namespace, nil
	}
	ns, _, err := o.ClientConfig().Namespace()
	return ns, err
}

// Command makes one top-level command.
type Command func(o *Options) *cobra.Command

// NewRoot returns the root command of the plugin with the given top-level commands (in help
// order; cmd/kubectl-kubelb lists them, each from its package under internal/cli).
func NewRoot(streams Streams, commands ...Command) *cobra.Command {
	o := &Options{Streams: streams}
	v := version.Get()
	root := &cobra.Command{
		Use:   "kubectl-kubelb",
		Short: "See why kubelb does or does not serve something, on the hub and in tenant clusters",
		Long: "kubectl kubelb tells each user of kubelb why something does or does not work, with the\n" +
			"credentials that user has: the platform team on the hub, tenant admins and app teams in\n" +
			"their tenant clusters.",
		Version:       fmt.Sprintf("%s (commit %s)", v.GitVersion, v.GitCommit),
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl kubelb"},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	f := root.PersistentFlags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "path to the kubeconfig of the cluster to work with (default: $KUBECONFIG, ~/.kube/config)")
	f.StringVar(&o.Context, "context", "", "kubeconfig context to use")
	f.StringVarP(&o.Namespace, "namespace", "n", "", "namespace (default: the context's)")
	f.StringVar(&o.HubKubeconfig, "hub-kubeconfig", "",
		"kubeconfig of the hub (management cluster) for tenant-side commands; default: the ccm's, from its Secret in the tenant cluster")
	for _, c := range commands {
		if c == nil {
			continue
		}
		root.AddCommand(c(o))
	}
	return root
}

// Group is a command that only holds subcommands, e.g. check (check hub, check tenant): the
// packages of the subcommands each give one Command.
func Group(use, short string, subcommands ...Command) Command {
	return func(o *Options) *cobra.Command {
		cmd := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() }}
		for _, sub := range subcommands {
			cmd.AddCommand(sub(o))
		}
		return cmd
	}
}
