package translate

import (
	"fmt"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
)

// maxRequestHeadersKB is Envoy's bound of HttpConnectionManager max_request_headers_kb (1
// to 8192); HttpProtocolOptions max_headers_count must be at least 1.
const maxRequestHeadersKB = 8192

// HeaderLimits converts the tenant's effective header limits (Config, or the Tenant's when
// set: envoyProxy.headerLimits) to the IR's (Input.HeaderLimits); nil when none is set. A
// value Envoy would refuse (0, or more than 8192 KiB) is left out and named in ignored, so
// it cannot make every HTTP listener rejected. maxResponseHeadersKb is not used.
func HeaderLimits(h *v1alpha1.HeaderLimits) (_ *ir.HeaderLimits, ignored []string) {
	if h == nil {
		return nil, nil
	}
	var out ir.HeaderLimits
	if v := h.MaxRequestHeadersKb; v != nil {
		if *v < 1 || *v > maxRequestHeadersKB {
			ignored = append(ignored, fmt.Sprintf("maxRequestHeadersKb=%d (1 to %d)", *v, maxRequestHeadersKB))
		} else {
			out.MaxRequestHeadersKB = *v
		}
	}
	if v := h.MaxRequestHeadersCount; v != nil {
		if *v < 1 {
			ignored = append(ignored, fmt.Sprintf("maxRequestHeadersCount=%d (at least 1)", *v))
		} else {
			out.MaxRequestHeadersCount = *v
		}
	}
	if out == (ir.HeaderLimits{}) {
		return nil, ignored
	}
	return &out, ignored
}
