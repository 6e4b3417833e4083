// Command kubectl-kubelb is the kubectl plugin of kubelb (`kubectl kubelb ...`): see
// internal/cli and docs/troubleshooting.md.
package main

import (
	"fmt"
	"os"

	"kubelb.dev/kubelb/internal/cli"
	"kubelb.dev/kubelb/internal/cli/checkhub"
	"kubelb.dev/kubelb/internal/cli/envoyadmin"
	"kubelb.dev/kubelb/internal/cli/ingresscmd"
	"kubelb.dev/kubelb/internal/cli/sysdump"
	"kubelb.dev/kubelb/internal/cli/tenantcmd"
	"kubelb.dev/kubelb/internal/cli/tenantside"
	"kubelb.dev/kubelb/internal/cli/translatecmd"
)

func main() {
	root := cli.NewRoot(cli.Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
		// One line per top-level command, in help order: each from its package under internal/cli.
		tenantside.StatusCommand,
		cli.Group("check", "Check that a hub or a tenant cluster is set up right, with a hint per failed check", checkhub.Command, tenantside.CheckTenantCommand),
		tenantcmd.Command,
		envoyadmin.Command,
		translatecmd.Command,
		ingresscmd.Command,
		sysdump.Command,
	)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
