package quota

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// objectBytes is what one object counts against limits.objectBytes: its spec as JSON, plus
// its labels and annotations (keys and values). The Store works it out once per
// resourceVersion; Objects once per call.
func objectBytes(m *metav1.ObjectMeta, spec any) int64 {
	n := jsonBytes(spec)
	for k, v := range m.Labels {
		n += int64(len(k) + len(v))
	}
	for k, v := range m.Annotations {
		n += int64(len(k) + len(v))
	}
	return n
}

// jsonBytes is the length of v as JSON (0 if it cannot be marshalled, which the API types
// always can).
func jsonBytes(v any) int64 {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return int64(len(b))
}

// LoadBalancerBytes is what lb counts against limits.objectBytes.
func LoadBalancerBytes(lb *kubelbv1alpha1.LoadBalancer) int64 {
	return objectBytes(&lb.ObjectMeta, &lb.Spec)
}

// RouteBytes is what rt counts against limits.objectBytes.
func RouteBytes(rt *kubelbv1alpha1.Route) int64 { return objectBytes(&rt.ObjectMeta, &rt.Spec) }
