package ir

import (
	"fmt"
	"slices"
)

// Compressor is a compression algorithm Envoy compresses responses with (Route.Compression):
// Envoy's compressor HTTP filter with the gzip or brotli library (Envoy's zstd compressor is a
// contrib extension, not in the Envoy kubelb runs).
type Compressor string

// The compressors, in the order the filters run in a listener (Listener.Compressors): when a
// client accepts several with the same quality, Envoy uses the first.
const (
	CompressorBrotli Compressor = "brotli"
	CompressorGzip   Compressor = "gzip"
)

// Compressors are the compressors Envoy serves, in the listeners' order.
var Compressors = []Compressor{CompressorBrotli, CompressorGzip}

// HasCompressor reports whether a route of the configuration compresses with c.
func (rc *RouteConfig) HasCompressor(c Compressor) bool {
	return rc.anyRoute(func(r *Route) bool { return slices.Contains(r.Compression, c) })
}

// validateCompression checks a route's compressors: known, each once.
func validateCompression(cs []Compressor) error {
	for i, c := range cs {
		if !slices.Contains(Compressors, c) {
			return fmt.Errorf("compressor %q: want one of %v", c, Compressors)
		}
		if slices.Contains(cs[:i], c) {
			return fmt.Errorf("compressor %q listed twice", c)
		}
	}
	return nil
}

// validateCompressors checks a listener's compressor filters: each runs exactly when a route
// it serves compresses with it (routes: by compressor, the route configurations that do), in
// Compressors' order.
func (l *Listener) validateCompressors(routes map[Compressor]map[string]bool) error {
	if !slices.IsSortedFunc(l.Compressors, func(a, b Compressor) int { return slices.Index(Compressors, a) - slices.Index(Compressors, b) }) {
		return fmt.Errorf("compressors %v: not in the order %v", l.Compressors, Compressors)
	}
	if err := validateCompression(l.Compressors); err != nil {
		return err
	}
	for _, c := range Compressors {
		if err := l.validateHTTPFilter(string(c)+" compressor", slices.Contains(l.Compressors, c), routes[c]); err != nil {
			return err
		}
	}
	return nil
}
