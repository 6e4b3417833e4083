package cli

import (
	"bytes"
	"strings"
	"testing"
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
