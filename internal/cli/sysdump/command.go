package sysdump

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kubelb.dev/kubelb/internal/cli"
)

// Command is `kubectl kubelb sysdump`.
func Command(o *cli.Options) *cobra.Command {
	opts := Options{}
	var output string
	c := &cobra.Command{
		Use:   "sysdump [-o FILE.tar.gz] [--envoy]",
		Short: "Write one archive of what a bug report about the hub needs (hub kubeconfig; Secrets' data left out)",
		Long: "sysdump writes one tar.gz of the hub: kubelb's objects of every kind (all namespaces),\n" +
			"the Services, Deployments, Pods and Events of the manager's and the tenants' namespaces,\n" +
			"the Secrets' metadata (never their data; SyncSecrets' data is replaced by REDACTED), the\n" +
			"manager pods' logs (leader and standbys) and, with --envoy, the config dump, clusters\n" +
			"and stats of one Envoy of each tenant's fleet (Envoy redacts private keys). What could\n" +
			"not be read is listed in errors.txt inside the archive.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.RESTConfig()
			if err != nil {
				return err
			}
			now := time.Now().UTC()
			if output == "" {
				output = "kubelb-sysdump-" + now.Format("20060102-150405") + ".tar.gz"
			}
			a, err := Collect(cmd.Context(), cfg, opts, o.Streams.Out)
			if err != nil {
				return err
			}
			for _, e := range a.Errors {
				fmt.Fprintf(o.Streams.Out, "✗ %s\n", e)
			}
			if err := write(a, output, now); err != nil {
				return err
			}
			fmt.Fprintf(o.Streams.Out, "wrote %s (%d files)\n", output, len(a.Paths()))
			return nil
		},
	}
	f := c.Flags()
	f.StringVarP(&output, "output", "o", "", "archive to write (default kubelb-sysdump-<UTC time>.tar.gz)")
	f.StringVar(&opts.ManagerNamespace, "manager-namespace", "kubelb", "namespace of the kubelb manager")
	f.StringVar(&opts.ManagerSelector, "manager-selector", "app.kubernetes.io/name=kubelb-manager", "label selector of the manager pods")
	f.StringVar(&opts.LeaseName, "lease", "kubelb-manager.kubelb.k8c.io", "the manager's leader-election Lease")
	f.Int64Var(&opts.Tail, "tail", 5000, "log lines of each manager container (0: all)")
	f.BoolVar(&opts.Envoy, "envoy", false, "add each tenant fleet's Envoy config dump, clusters and stats (port-forwards to the pods)")
	return c
}

// write writes the archive to path (through a temporary file beside it).
func write(a *Archive, path string, now time.Time) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kubelb-sysdump-*")
	if err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	defer os.Remove(tmp.Name())
	dir := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".gz"), ".tar")
	if err := a.WriteTarGz(tmp, dir, now); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the archive: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	return nil
}
