package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestRootVersion(t *testing.T) {
	var out bytes.Buffer
	root := NewRoot(Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	root.SetArgs([]string{"--version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "kubectl kubelb version ") {
		t.Errorf("--version printed %q", out.String())
	}
}

func TestGroupHoldsSubcommands(t *testing.T) {
	var out bytes.Buffer
	sub := func(o *Options) *cobra.Command {
		return &cobra.Command{Use: "tenant", RunE: func(*cobra.Command, []string) error {
			_, err := o.Streams.Out.Write([]byte("ran tenant\n"))
			return err
		}}
	}
	root := NewRoot(Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out}, Group("check", "checks", sub))
	root.SetArgs([]string{"check", "tenant"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if out.String() != "ran tenant\n" {
		t.Errorf("check tenant printed %q", out.String())
	}
}
