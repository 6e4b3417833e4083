package translate_test

import (
	"testing"

	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate"
)

func TestHeaderLimits(t *testing.T) {
	t.Parallel()
	if got, ignored := translate.HeaderLimits(nil); got != nil || ignored != nil {
		t.Errorf("nil: %+v %v", got, ignored)
	}
	got, ignored := translate.HeaderLimits(&v1alpha1.HeaderLimits{MaxRequestHeadersKb: ptr.To[uint32](9000), MaxRequestHeadersCount: ptr.To[uint32](80),
		MaxResponseHeadersKb: ptr.To[uint32](10)})
	if got == nil || *got != (ir.HeaderLimits{MaxRequestHeadersCount: 80}) || len(ignored) != 1 {
		t.Errorf("a size Envoy refuses is left out: %+v %v", got, ignored)
	}
	if got, ignored := translate.HeaderLimits(&v1alpha1.HeaderLimits{MaxRequestHeadersCount: ptr.To[uint32](0)}); got != nil || len(ignored) != 1 {
		t.Errorf("count 0: %+v %v", got, ignored)
	}
}
