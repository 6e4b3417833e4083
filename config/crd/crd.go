// Package crd holds kubelb's CRDs as generated into bases/ (make generate), for programs that
// compare them with a cluster's (kubectl kubelb check hub).
package crd

import "embed"

// Bases are the generated CRD manifests, bases/*.yaml.
//
//go:embed bases/*.yaml
var Bases embed.FS
