package checkhub

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"kubelb.dev/kubelb/internal/cli"
)

// Command is `check hub`.
func Command(o *cli.Options) *cobra.Command {
	opts := Options{ManagerNamespace: "kubelb"}
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Check the hub: manager, leader, CRDs, xDS CA, tenants and their fleets, addresses, ports (hub kubeconfig)",
		Long: "check hub runs, with a platform team's hub kubeconfig, one check per line: the manager's\n" +
			"replicas and version, its leader, kubelb's CRDs against this plugin's, the xDS CA's expiry,\n" +
			"each tenant and its Envoy fleet, configurations Envoy rejected, hub Services waiting for an\n" +
			"address (and the load-balancer classes nobody serves), listener ports left and settings\n" +
			"accepted but not implemented yet. Each failed check says what to do; the exit status is 1\n" +
			"when a check failed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.Client()
			if err != nil {
				return err
			}
			opts.Now = time.Now()
			if failed := Print(o.Streams.Out, Run(cmd.Context(), c, opts)); failed > 0 {
				return fmt.Errorf("%d of the hub's checks failed", failed)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.ManagerNamespace, "manager-namespace", opts.ManagerNamespace, "namespace the kubelb manager runs in")
	return cmd
}
