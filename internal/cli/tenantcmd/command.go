package tenantcmd

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/cli"
)

// flags are the tenant cluster's and the copy's.
type flags struct {
	kubeconfig, context string
	copy                Copy
	timeout             time.Duration
	deleteTenant        bool
}

// tenantCopy is f.copy with a client of the tenant cluster, or without one when neither
// --tenant-kubeconfig nor --tenant-context is set.
func (f *flags) tenantCopy() (Copy, error) {
	dst := f.copy
	if f.kubeconfig == "" && f.context == "" {
		return dst, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	if err != nil {
		return dst, err
	}
	dst.Client, err = cli.NewClient(cfg)
	return dst, err
}

// Command is `tenant` with onboard, kubeconfig and revoke.
func Command(o *cli.Options) *cobra.Command {
	f := &flags{copy: Copy{Namespace: "kubelb", Name: "kubelb-cluster", Key: "kubelb"}, timeout: 2 * time.Minute}
	cmd := &cobra.Command{
		Use:   "tenant",
		Short: "Onboard a tenant, copy its ccm's kubeconfig into its cluster, revoke its tokens (hub kubeconfig)",
		Args:  cobra.NoArgs,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.kubeconfig, "tenant-kubeconfig", "", "kubeconfig of the tenant cluster (with --tenant-context alone: $KUBECONFIG, ~/.kube/config)")
	pf.StringVar(&f.context, "tenant-context", "", "kubeconfig context of the tenant cluster")
	pf.StringVar(&f.copy.Namespace, "ccm-namespace", f.copy.Namespace, "namespace of the ccm in the tenant cluster")
	pf.StringVar(&f.copy.Name, "secret-name", f.copy.Name, "Secret the ccm reads its hub kubeconfig from (kubelb-ccm chart value kubelb.kubeconfigSecretName)")
	pf.StringVar(&f.copy.Key, "secret-key", f.copy.Key, "key of that Secret (chart value kubelb.kubeconfigSecretKey)")

	run := func(do func(ctx context.Context, hub client.Client, name string, dst Copy) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			hub, err := o.Client()
			if err != nil {
				return err
			}
			dst, err := f.tenantCopy()
			if err != nil {
				return err
			}
			return do(cmd.Context(), hub, args[0], dst)
		}
	}
	onboard := &cobra.Command{
		Use:   "onboard <name>",
		Short: "Create Tenant <name> on the hub and write its ccm's kubeconfig into the tenant cluster",
		Long: "onboard creates the Tenant on the hub (the --kubeconfig/--context cluster), waits for the manager\n" +
			"to write the ccm's kubeconfig (Secret " + kubelbv1alpha1.CCMKubeconfigSecretName + " in tenant-<name>) and writes it\n" +
			"straight into the tenant cluster (--tenant-kubeconfig/--tenant-context), Secret kubelb-cluster in\n" +
			"--ccm-namespace, where the kubelb-ccm chart reads it. Nothing is written to disk.",
		Args: cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, hub client.Client, name string, dst Copy) error {
			return Onboard(ctx, hub, name, dst, f.timeout, o.Streams.Out)
		}),
	}
	kubeconfig := &cobra.Command{
		Use:   "kubeconfig <name>",
		Short: "Copy the hub's current kubeconfig of tenant <name> into the tenant cluster again (after a revocation)",
		Args:  cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, hub client.Client, name string, dst Copy) error {
			return CopyKubeconfig(ctx, hub, name, dst, f.timeout, o.Streams.Out)
		}),
	}
	for _, c := range []*cobra.Command{onboard, kubeconfig} {
		c.Flags().DurationVar(&f.timeout, "timeout", f.timeout, "how long to wait for the manager to write the kubeconfig")
	}
	revoke := &cobra.Command{
		Use:   "revoke <name>",
		Short: "Revoke every token of tenant <name> and delete the copy in the tenant cluster",
		Long: "revoke deletes the tenant's ServiceAccount on the hub, so every token of it stops working (the\n" +
			"manager makes a new one with a new kubeconfig about 12 s later: copy it with `tenant kubeconfig`),\n" +
			"and deletes the kubeconfig Secret in the tenant cluster when one is named. --delete-tenant also\n" +
			"deletes the Tenant.",
		Args: cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, hub client.Client, name string, dst Copy) error {
			return Revoke(ctx, hub, name, dst, f.deleteTenant, o.Streams.Out)
		}),
	}
	revoke.Flags().BoolVar(&f.deleteTenant, "delete-tenant", false, "delete the Tenant too")
	cmd.AddCommand(onboard, kubeconfig, revoke)
	return cmd
}
