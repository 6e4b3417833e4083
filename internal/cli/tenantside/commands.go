package tenantside

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/cli"
	"kubelb.dev/kubelb/internal/process"
)

// StatusCommand is `kubectl kubelb status <kind>/<name>`.
func StatusCommand(o *cli.Options) *cobra.Command {
	var hubNamespace string
	cmd := &cobra.Command{
		Use:   "status <kind>/<name>",
		Short: "Follow a Service, Ingress, Gateway or route to the hub and say which step fails",
		Long: "status follows one object of the tenant cluster to its hub object, its hub Service, address\n" +
			"and listener ports, whether Envoy accepted it and what the hub knows of its endpoints; it\n" +
			"prints every condition on the way and the first failing step with what to do. A step the\n" +
			"hub has no verdict on (endpoints not yet health-checked, or too many to check) prints ?\n" +
			"with the hub's message, and does not fail the command. It needs the\n" +
			"tenant kubeconfig and the ccm's hub kubeconfig (--hub-kubeconfig, else the ccm's Secret).\n" +
			"Kinds: " + KindChoices + ".",
		Example: "  kubectl kubelb status svc/web -n shop\n  kubectl kubelb status ingress/web --hub-kubeconfig hub.kubeconfig",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := o.CurrentNamespace()
			if err != nil {
				return fmt.Errorf("reading the kubeconfig: %w", err)
			}
			target, err := ParseTarget(args[0], ns)
			if err != nil {
				return err
			}
			tenant, err := tenantClient(o)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			hub := HubAccess{}
			found, _ := FindCCM(ctx, tenant) // an app team may not read Deployments: the defaults then
			if hub.Hub, hub.Err = LoadHub(ctx, tenant, o.HubKubeconfig, found, hubNamespaceOf(hubNamespace, found)); hub.Err == nil {
				hub.Client, hub.Err = client.New(hub.Hub.Config, client.Options{Scheme: process.Scheme()})
			}
			r := Status(ctx, tenant, hub, target)
			w := o.Streams.Out
			fmt.Fprintf(w, "%s\n", target)
			PrintSteps(w, r.Steps)
			for _, c := range r.Conditions {
				PrintConditions(w, c.Heading, c.Conditions)
			}
			for _, rej := range r.Rejections {
				fmt.Fprintf(w, "Envoy rejection: proxy %s, %s: %s\n", rej.Proxy, rej.TypeURL, oneLine(rej.Message))
			}
			if r.OtherRejections > 0 {
				fmt.Fprintf(w, "%d other Envoy rejection(s) of this tenant's configuration name other objects (`kubectl kubelb check tenant` shows the first)\n", r.OtherRejections)
			}
			if f := FirstFailed(r.Steps); f != nil {
				fmt.Fprintf(w, "first failing step: %s\n    %s\n", f.Name, oneLine(f.Hint))
				return fmt.Errorf("%s: step %q fails", target, f.Name)
			}
			if p := Pendings(r.Steps); len(p) > 0 {
				fmt.Fprintf(w, "no step fails; unknown: %s\n", strings.Join(p, ", "))
				return nil
			}
			fmt.Fprintln(w, "every step is ok")
			return nil
		},
	}
	cmd.Flags().StringVar(&hubNamespace, "hub-namespace", "", "the tenant's namespace on the hub (default: the hub kubeconfig's, else the ccm's --cluster-name)")
	return cmd
}

// CheckTenantCommand is `kubectl kubelb check tenant [--pre]` (a subcommand of check).
func CheckTenantCommand(o *cli.Options) *cobra.Command {
	var pre bool
	var hubNamespace, addressType string
	cmd := &cobra.Command{
		Use:   "tenant",
		Short: "Check a tenant cluster's ccm, hub access, token, permissions, nodes, CRDs and classes",
		Long: "check tenant checks what the ccm of a tenant cluster needs: the hub reachable with its\n" +
			"kubeconfig, the token's expiry, the rights on the hub, the ccm's lease, the nodes' address\n" +
			"type, the Gateway API CRDs against the ccm's flags, and the IngressClass and GatewayClass.\n" +
			"--pre keeps the checks that make sense before the ccm is installed (then pass the hub\n" +
			"kubeconfig with --hub-kubeconfig). A hint follows each failed check; the exit code is 1\n" +
			"when one fails.",
		Example: "  kubectl kubelb check tenant\n  kubectl kubelb check tenant --pre --hub-kubeconfig hub.kubeconfig --node-address-type InternalIP",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tenant, err := tenantClient(o)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			env := TenantEnv{Tenant: tenant, NodeAddressType: addressType, Now: time.Now()}
			if env.CCM, err = FindCCM(ctx, tenant); err != nil && !pre {
				return err
			}
			if env.Hub, env.HubErr = LoadHub(ctx, tenant, o.HubKubeconfig, env.CCM, hubNamespaceOf(hubNamespace, env.CCM)); env.HubErr == nil {
				if env.HubClient, err = client.New(env.Hub.Config, client.Options{Scheme: process.Scheme()}); err != nil {
					return fmt.Errorf("the hub kubeconfig: %w", err)
				}
				if env.HubClientset, err = kubernetes.NewForConfig(env.Hub.Config); err != nil {
					return fmt.Errorf("the hub kubeconfig: %w", err)
				}
			}
			steps := CheckTenant(ctx, env, pre)
			PrintSteps(o.Streams.Out, steps)
			failedN := 0
			for _, s := range steps {
				if s.State == Failed {
					failedN++
				}
			}
			if failedN > 0 {
				return fmt.Errorf("%d of %d checks failed", failedN, len(steps))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&pre, "pre", false, "only the checks that make sense before the ccm is installed")
	f.StringVar(&hubNamespace, "hub-namespace", "", "the tenant's namespace on the hub (default: the hub kubeconfig's, else the ccm's --cluster-name)")
	f.StringVar(&addressType, "node-address-type", "", "node address type to check for: ExternalIP, InternalIP or Hostname (default: the ccm's flag, else ExternalIP)")
	return cmd
}

// hubNamespaceOf is the --hub-namespace flag, else the ccm's --cluster-name (tenant-<name>),
// else "" (the hub kubeconfig's).
func hubNamespaceOf(flag string, c *CCM) string {
	if flag != "" {
		return flag
	}
	return ccm.HubNamespace(c.Flag("--cluster-name", ""))
}

// tenantClient is a client of the cluster the kubeconfig flags select.
func tenantClient(o *cli.Options) (client.Client, error) {
	cfg, err := o.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 15 * time.Second
	c, err := client.New(cfg, client.Options{Scheme: process.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster of the kubeconfig: %w", err)
	}
	return c, nil
}
