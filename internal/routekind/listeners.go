package routekind

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ListenersServed is how many of a Gateway's n listeners are served (the first
// MaxListeners), and the problem to report when some are not ("" when all are).
func ListenersServed(n int) (int, string) {
	if n <= MaxListeners {
		return n, ""
	}
	return MaxListeners, fmt.Sprintf("the Gateway has %d listeners; only the first %d are served", n, MaxListeners)
}

// MaxListeners is the most listeners of a Gateway that are served (get ports, get Envoy
// listeners), as in Gateway API.
const MaxListeners = 64

// ListenerPort is one port of a Gateway's hub Service: one listener port.
type ListenerPort struct {
	Protocol corev1.Protocol
	Port     int32
}

// listenerProtocols maps Gateway listener protocols to Service protocols.
var listenerProtocols = map[string]corev1.Protocol{
	"HTTP": corev1.ProtocolTCP, "HTTPS": corev1.ProtocolTCP, "TLS": corev1.ProtocolTCP,
	"TCP": corev1.ProtocolTCP, "UDP": corev1.ProtocolUDP,
}

// GatewayPorts returns the distinct (port, protocol) pairs of a Gateway's spec.listeners,
// sorted by port then protocol, and a description of every listener left out: beyond the
// first MaxListeners, not an object, a port outside 1-65535 or not a whole number, an
// unknown protocol. The Gateway is tenant input: nothing of it is trusted.
func GatewayPorts(u *unstructured.Unstructured) (ports []ListenerPort, problems []string) {
	return GatewayPortsWith(u, nil)
}

// GatewayPortsWith is GatewayPorts with the listeners of the ListenerSets the Gateway takes
// (sets, the embedded ListenerSets in the order GatewaySets gives) added: a Gateway and its
// ListenerSets have at most MaxListeners listeners together, counted in that order (the
// Gateway's first); the listeners of ListenerSets beyond that get no port (the translation
// reports them on their ListenerSet, as it does invalid ones, which are left out here without
// a word).
func GatewayPortsWith(u *unstructured.Unstructured, sets []*unstructured.Unstructured) (ports []ListenerPort, problems []string) {
	raw, found, err := unstructured.NestedFieldNoCopy(u.Object, "spec", "listeners")
	if err != nil || !found {
		return nil, []string{"the Gateway has no spec.listeners"}
	}
	listeners, ok := raw.([]any)
	if !ok {
		return nil, []string{"spec.listeners is not a list"}
	}
	if n, problem := ListenersServed(len(listeners)); problem != "" {
		problems = append(problems, problem)
		listeners = listeners[:n]
	}
	seen := map[ListenerPort]bool{}
	add := func(l any, i int, report bool) {
		m, ok := l.(map[string]any)
		if !ok {
			if report {
				problems = append(problems, fmt.Sprintf("listener %d is not an object", i))
			}
			return
		}
		label := func() string { // only for a problem: most listeners have none
			if name, ok := m["name"].(string); ok && len(validation.IsDNS1123Subdomain(name)) == 0 {
				return fmt.Sprintf("listener %q", name)
			}
			return fmt.Sprintf("listener %d", i)
		}
		port, ok := wholeNumber(m["port"])
		if !ok || port < 1 || port > 65535 {
			if report {
				problems = append(problems, fmt.Sprintf("%s: port must be a number from 1 to 65535", label()))
			}
			return
		}
		protoName, _ := m["protocol"].(string)
		proto, ok := listenerProtocols[protoName]
		if !ok {
			if report {
				problems = append(problems, fmt.Sprintf("%s: protocol must be HTTP, HTTPS, TLS, TCP or UDP", label()))
			}
			return
		}
		lp := ListenerPort{Protocol: proto, Port: int32(port)}
		if !seen[lp] {
			seen[lp] = true
			ports = append(ports, lp)
		}
	}
	for i, l := range listeners {
		add(l, i, true)
	}
	room := MaxListeners - len(listeners)
	for _, set := range sets {
		ls, _, _ := unstructured.NestedSlice(set.Object, "spec", "listeners")
		for i, l := range ls {
			if room == 0 {
				break
			}
			room--
			add(l, i, false)
		}
	}
	slices.SortFunc(ports, func(a, b ListenerPort) int {
		return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
	})
	return ports, problems
}

// wholeNumber reads a JSON number (int64 from the API machinery, float64 or json.Number
// from elsewhere) that is a whole number.
func wholeNumber(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	case float64:
		if n != math.Trunc(n) || math.IsInf(n, 0) || math.Abs(n) > 1e9 {
			return 0, false
		}
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

// ValidRouteName reports whether a Route's name can label its hub Service (a Gateway
// Route with another name gets no hub Service and no ports).
// It is validation.IsValidLabelValue without the regular expression (every reconcile asks it
// of every Route of the tenant).
func ValidRouteName(name string) bool {
	if len(name) > validation.LabelValueMaxLength {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		inner := i > 0 && i < len(name)-1 && (c == '-' || c == '_' || c == '.')
		if !alnum && !inner {
			return false
		}
	}
	return true
}
