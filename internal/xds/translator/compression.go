package translator

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	brotliv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/brotli/compressor/v3"
	gzipv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/gzip/compressor/v3"
	compressorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/compressor/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"kubelb.dev/kubelb/internal/ir"
)

// Response compression (ir.Route.Compression) runs Envoy's compressor HTTP filter, one per
// library, in the connection managers of the listeners with Compressors, just before the
// router. Each filter is off (HttpFilter.disabled); a route that compresses with it turns it
// on with a per-route configuration (CompressorPerRoute: response compression enabled). With
// several, each request is compressed once, with the encoding the client prefers (its
// Accept-Encoding quality values; on a tie, the first filter: Brotli before Gzip). The
// filters keep Envoy's defaults: responses of at least 30 bytes, of the usual text types
// (text/html, text/plain, application/json, ...), without a Content-Encoding of their own;
// an ETag is kept weak. The route drops the request's Accept-Encoding before the backend
// (route.go), so a backend never compresses what Envoy would compress again.

// compressorFilterName is the name of the compressor filter of library c.
func compressorFilterName(c ir.Compressor) string {
	return "envoy.filters.http.compressor." + string(c)
}

// compressorFilter is the connection manager's compressor filter of library c, off.
func compressorFilter(c ir.Compressor, errs *[]error) *hcmv3.HttpFilter {
	var lib proto.Message
	name := "envoy.compression.gzip.compressor"
	switch c {
	case ir.CompressorBrotli:
		lib, name = &brotliv3.Brotli{}, "envoy.compression.brotli.compressor"
	default:
		lib = &gzipv3.Gzip{}
	}
	cfg := &compressorv3.Compressor{
		CompressorLibrary: &corev3.TypedExtensionConfig{Name: name, TypedConfig: mustPack(errs, lib)},
	}
	return &hcmv3.HttpFilter{Name: compressorFilterName(c), Disabled: true,
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustPack(errs, cfg)}}
}

// compressorPerRoute turns a listener's compressor filter on for one route.
func compressorPerRoute(errs *[]error) *anypb.Any {
	return mustPack(errs, &compressorv3.CompressorPerRoute{Override: &compressorv3.CompressorPerRoute_Overrides{
		Overrides: &compressorv3.CompressorOverrides{ResponseDirectionConfig: &compressorv3.ResponseDirectionOverrides{}},
	}})
}
