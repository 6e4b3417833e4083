package trafficpolicy

import (
	"slices"
	"strings"
	"testing"
)

// TestReadAndResolveCompression: Envoy Gateway's compressor list, or its deprecated
// compression list, comes through in the policy's order; each library's (empty) settings are
// accepted.
func TestReadAndResolveCompression(t *testing.T) {
	for _, key := range []string{"compressor", "compression"} {
		bt, err := Read("ns", "p", spec(t, `
targetRef: {group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}
`+key+`: [{type: Brotli, brotli: {}}, {type: Gzip}]
`))
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		s, err := Resolve(bt)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if !slices.Equal(s.Compression, []string{Brotli, Gzip}) {
			t.Errorf("%s: compression %v, want [Brotli Gzip]", key, s.Compression)
		}
	}
}

// TestCompressionRefused: what kubelb cannot serve as written is refused, naming it:
// minContentLength and library settings (not read yet), both lists at once, Zstd (the hub's
// Envoy has no zstd compressor), an unknown type, a type twice, another library's settings.
func TestCompressionRefused(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{`compressor: [{type: Gzip, minContentLength: 100}]`, "spec.compressor[0].minContentLength not yet supported by kubelb"},
		{`compression: [{type: Gzip, gzip: {level: 9}}]`, "spec.compression[0].gzip.level not yet supported by kubelb"},
		{`{compressor: [{type: Gzip}], compression: [{type: Brotli}]}`, "spec.compressor and spec.compression are both set"},
		{`compressor: [{type: Zstd}]`, "type Zstd is not served by kubelb"},
		{`compressor: [{type: Deflate}]`, `type "Deflate": use Gzip or Brotli`},
		{`compressor: [{type: Gzip}, {type: Gzip}]`, "compressor[1]: type Gzip is listed twice"},
		{`compressor: [{type: Gzip, brotli: {}}]`, "settings of another compressor than its type Gzip"},
	} {
		bt, err := Read("ns", "p", spec(t, c.spec))
		if err == nil {
			_, err = Resolve(bt)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.spec, err, c.want)
		}
		if un := Unsupported(spec(t, c.spec)); strings.Contains(c.want, "not yet supported") && len(un) == 0 {
			t.Errorf("%s: Unsupported names nothing", c.spec)
		}
	}
}
