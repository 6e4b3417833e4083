// Package trafficpolicy reads Envoy Gateway's BackendTrafficPolicy, SecurityPolicy and
// ClientTrafficPolicy (gateway.envoyproxy.io/v1alpha1) into kubelb's subsets
// (v1alpha1.BackendTraffic, v1alpha1.Security, v1alpha1.ClientTraffic) and checks them: the
// ccm reads and checks the tenant's policies (Read, ReadSecurity, ReadClient), the hub's
// translation checks again what a Route carries (Resolve, ResolveSecurity, ResolveClient). It depends on neither side; Envoy Gateway's Go module is not used.
package trafficpolicy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/textcut"
)

// Group, Version and Kinds of the policies read.
const (
	Group        = "gateway.envoyproxy.io"
	Version      = "v1alpha1"
	Kind         = "BackendTrafficPolicy"
	SecurityKind = "SecurityPolicy"
)

// served is the tree of the BackendTrafficPolicy spec fields kubelb serves: a nil value is a
// leaf (any content, checked by Resolve or by the ccm's reading of targets).
var served = map[string]any{
	"targetRef":  nil,
	"targetRefs": nil,
	// targetSelectors: read by Selectors.
	"targetSelectors": nil,
	"loadBalancer": map[string]any{
		"type": nil,
		"consistentHash": map[string]any{
			"type":      nil,
			"header":    map[string]any{"name": nil},
			"cookie":    map[string]any{"name": nil, "ttl": nil},
			"tableSize": nil,
		},
	},
	"circuitBreaker": map[string]any{
		"maxConnections": nil, "maxPendingRequests": nil, "maxParallelRequests": nil,
		"maxParallelRetries": nil, "maxRequestsPerConnection": nil,
	},
	"healthCheck": map[string]any{
		"passive": map[string]any{
			"splitExternalLocalOriginErrors": nil, "interval": nil, "consecutiveLocalOriginFailures": nil,
			"consecutiveGatewayErrors": nil, "consecutive5XxErrors": nil, "baseEjectionTime": nil,
			"maxEjectionPercent": nil, "alwaysEjectOneEndpoint": nil,
		},
	},
	"retry": map[string]any{
		"numRetries": nil,
		"retryOn":    map[string]any{"triggers": nil, "httpStatusCodes": nil},
		"perRetry": map[string]any{
			"timeout": nil,
			"backOff": map[string]any{"baseInterval": nil, "maxInterval": nil},
		},
	},
	"timeout": map[string]any{
		"tcp":  map[string]any{"connectTimeout": nil},
		"http": map[string]any{"requestTimeout": nil, "connectionIdleTimeout": nil},
	},
	"rateLimit":   servedRateLimit,
	"compression": nil, // compressionUnsupported
	"compressor":  nil,
}

// maxUnsupported bounds the unsupported fields a message names.
const maxUnsupported = 8

// Unsupported lists the fields of a BackendTrafficPolicy's spec that kubelb does not serve
// ("spec.rateLimit", "spec.loadBalancer.slowStart"), sorted; at most maxUnsupported, then "…".
func Unsupported(spec map[string]any) []string {
	out := append(unsupported(spec, served), rateLimitUnsupported(spec)...)
	out = append(out, compressionUnsupported(spec)...)
	if len(out) > maxUnsupported {
		out = append(out[:maxUnsupported], "…")
	}
	return out
}

// unsupported lists the fields of spec outside the tree of served fields.
func unsupported(spec map[string]any, served map[string]any) []string {
	var out []string
	var walk func(m map[string]any, tree map[string]any, path string)
	walk = func(m map[string]any, tree map[string]any, path string) {
		for k, v := range m {
			sub, ok := tree[k]
			switch {
			case !ok:
				out = append(out, path+"."+truncate(k))
			case sub != nil:
				if child, isMap := v.(map[string]any); isMap {
					walk(child, sub.(map[string]any), path+"."+k)
				}
			}
		}
	}
	walk(spec, served, "spec")
	sort.Strings(out)
	if len(out) > maxUnsupported {
		out = append(out[:maxUnsupported], "…")
	}
	return out
}

// Read reads a policy's spec into kubelb's subset: what Route contexts carry. It fails when
// the spec has fields kubelb does not serve (Unsupported) or when a field has the wrong type.
// Resolve then checks the values.
func Read(namespace, name string, spec map[string]any) (*v1alpha1.BackendTraffic, error) {
	if un := append(rateLimitUnsupported(spec), compressionUnsupported(spec)...); len(un) > 0 {
		if len(un) > maxUnsupported {
			un = append(un[:maxUnsupported], "…")
		}
		return nil, fmt.Errorf("%s not yet supported by kubelb", strings.Join(un, ", "))
	}
	if _, both := spec["compression"]; both {
		if _, ok := spec["compressor"]; ok {
			return nil, fmt.Errorf("spec.compressor and spec.compression are both set; use compressor (compression is deprecated)")
		}
	}
	out := &v1alpha1.BackendTraffic{}
	if err := readSpec(spec, served, out); err != nil {
		return nil, err
	}
	out.Namespace, out.Name = namespace, name
	return out, nil
}

// readSpec reads the settings of a policy's spec (all but its targets) into out, a kubelb
// type: it fails when the spec has fields outside the tree of served fields, or a field of
// the wrong type.
func readSpec(spec map[string]any, served map[string]any, out any) error {
	if un := unsupported(spec, served); len(un) > 0 {
		return fmt.Errorf("%s not yet supported by kubelb", strings.Join(un, ", "))
	}
	settings := map[string]any{}
	for k, v := range spec {
		if k != "targetRef" && k != "targetRefs" && k != "targetSelectors" {
			settings[k] = v
		}
	}
	readCompression(settings)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(settings, out, true); err != nil {
		return fmt.Errorf("the spec cannot be read: %s", truncate(err.Error()))
	}
	return nil
}

// truncate bounds a tenant string quoted in a message.
func truncate(s string) string { return textcut.Cut(s, 64+len(textcut.Ellipsis), textcut.Ellipsis) }

// Target is one targetRef of a policy.
type Target struct {
	Group, Kind, Name, SectionName string
}

// Targets reads a policy's targetRef and targetRefs (unstructured spec).
func Targets(spec map[string]any) []Target {
	var out []Target
	read := func(m map[string]any) {
		s := func(k string) string { v, _ := m[k].(string); return v }
		t := Target{Group: s("group"), Kind: s("kind"), Name: s("name"), SectionName: s("sectionName")}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if m, ok := spec["targetRef"].(map[string]any); ok {
		read(m)
	}
	if l, ok := spec["targetRefs"].([]any); ok {
		for _, e := range l {
			if m, ok := e.(map[string]any); ok {
				read(m)
			}
		}
	}
	return out
}
