package trafficpolicy

import (
	"fmt"
	"slices"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// Compressor types of Envoy Gateway's compressor list kubelb serves (Settings.Compression).
const (
	Gzip   = "Gzip"
	Brotli = "Brotli"
	// Zstd is Envoy Gateway's; Envoy's zstd compressor is a contrib extension the hub's Envoy
	// does not have: a policy asking for it is refused.
	Zstd = "Zstd"
)

// compressionFields are the fields of one compressor kubelb serves: its type and the
// settings of its library, which have no fields in the Envoy Gateway version read.
var compressionFields = map[string]any{"type": nil, "gzip": map[string]any{}, "brotli": map[string]any{}, "zstd": map[string]any{}}

// compressionUnsupported names the fields of a policy's compressors kubelb does not serve
// (spec.compressor[0].minContentLength ...), and both lists when a policy sets both.
func compressionUnsupported(spec map[string]any) []string {
	var out []string
	for _, key := range []string{"compression", "compressor"} {
		list, _ := spec[key].([]any)
		for i, e := range list {
			m, ok := e.(map[string]any)
			if !ok {
				continue
			}
			for _, f := range unsupported(m, compressionFields) {
				out = append(out, fmt.Sprintf("spec.%s[%d]%s", key, i, f[len("spec"):]))
			}
		}
	}
	return out
}

// readCompression moves a policy's compressor list (or its deprecated compression, when the
// compressor list is unset: Envoy Gateway's precedence) into settings' "compression", which
// v1alpha1.BackendTraffic carries.
func readCompression(settings map[string]any) {
	if c, ok := settings["compressor"]; ok {
		settings["compression"] = c
		delete(settings, "compressor")
	}
}

// resolveCompression checks a policy's compressors: Gzip or Brotli, each once. It returns
// them in the policy's order.
func resolveCompression(cs []v1alpha1.TrafficCompression, bad func(string, ...any)) []string {
	var out []string
	for i, c := range cs {
		switch {
		case c.Type == Zstd:
			bad("compressor[%d]: type Zstd is not served by kubelb (the hub's Envoy has no zstd compressor); use Gzip or Brotli", i)
		case c.Type != Gzip && c.Type != Brotli:
			bad("compressor[%d]: type %q: use Gzip or Brotli", i, truncate(c.Type))
		case slices.Contains(out, c.Type):
			bad("compressor[%d]: type %s is listed twice", i, c.Type)
		case c.Gzip != nil && c.Type != Gzip, c.Brotli != nil && c.Type != Brotli, c.Zstd != nil:
			bad("compressor[%d]: settings of another compressor than its type %s", i, c.Type)
		default:
			out = append(out, c.Type)
		}
	}
	return out
}
