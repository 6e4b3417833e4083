package envoyadmin

import (
	"fmt"
	"sort"
	"strings"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// Names maps Envoy's names (of listeners, clusters, route configurations, stat prefixes) back
// to the tenant objects they were made of. The translation names a LoadBalancer's listener
// and cluster "<lb name>-<proto>-<port>" and its stats "<origin ns>/<origin name>/<proto>-<port>";
// a Route's resources carry the Route's name as a "/"-separated segment
// ("gateway/<route>/tcp-443", "<route>/<ns>/<service>/<port>").
type Names struct {
	lbs map[string]v1alpha1.LoadBalancer
	// byOrigin are the LoadBalancers by "<origin ns>/<origin name>/" (stat prefixes).
	byOrigin map[string]string
	routes   map[string]v1alpha1.Route
	// gateways are the Routes of Gateways by "<origin ns>/<origin name>/" (the stat prefixes of
	// their listeners).
	gateways map[string]string
	// lbNames are the LoadBalancer names, longest first (a name may prefix another).
	lbNames []string
}

// NewNames maps the names of the tenant's LoadBalancers and Routes.
func NewNames(lbs []v1alpha1.LoadBalancer, routes []v1alpha1.Route) *Names {
	n := &Names{lbs: map[string]v1alpha1.LoadBalancer{}, byOrigin: map[string]string{}, routes: map[string]v1alpha1.Route{}, gateways: map[string]string{}}
	for _, lb := range lbs {
		n.lbs[lb.Name] = lb
		if ns, name := lb.Labels[v1alpha1.LabelOriginNamespace], lb.Labels[v1alpha1.LabelOriginName]; ns != "" && name != "" {
			n.byOrigin[ns+"/"+name+"/"] = lb.Name
		}
		n.lbNames = append(n.lbNames, lb.Name)
	}
	sort.Slice(n.lbNames, func(i, j int) bool { return len(n.lbNames[i]) > len(n.lbNames[j]) })
	for _, r := range routes {
		n.routes[r.Name] = r
		ns, name := r.Labels[v1alpha1.LabelOriginNamespace], r.Labels[v1alpha1.LabelOriginName]
		if strings.HasPrefix(r.Labels[v1alpha1.LabelOriginResourceKind], "Gateway.") && ns != "" && name != "" {
			n.gateways[ns+"/"+name+"/"] = r.Name
		}
	}
	return n
}

// Of says which object an Envoy name belongs to ("LoadBalancer <name> (Service shop/web) port
// tcp-80"), or "" when no object of the tenant has it.
func (n *Names) Of(name string) string {
	for _, lb := range n.lbNames {
		if rest, ok := strings.CutPrefix(name, lb+"-"); ok {
			return fmt.Sprintf("LoadBalancer %s%s port %s", lb, origin(n.lbs[lb].Labels, "Service"), rest)
		}
	}
	if i := strings.LastIndex(name, "/"); i > 0 {
		if lb, ok := n.byOrigin[name[:i+1]]; ok {
			return fmt.Sprintf("LoadBalancer %s%s port %s", lb, origin(n.lbs[lb].Labels, "Service"), name[i+1:])
		}
		if r, ok := n.gateways[name[:i+1]]; ok {
			return fmt.Sprintf("Route %s%s %s", r, origin(n.routes[r].Labels, "object"), name[i+1:])
		}
	}
	parts := strings.Split(name, "/")
	for i, p := range parts {
		if r, ok := n.routes[p]; ok {
			kind := r.Labels[v1alpha1.LabelOriginResourceKind]
			if kind == "" {
				kind = "object"
			}
			s := fmt.Sprintf("Route %s%s", r.Name, origin(r.Labels, kind))
			if rest := strings.Join(parts[i+1:], "/"); rest != "" {
				s += " " + rest
			}
			return s
		}
	}
	return ""
}

// Annotate returns name followed by the object it belongs to, when known.
func (n *Names) Annotate(name string) string {
	if of := n.Of(name); of != "" {
		return name + "  (" + of + ")"
	}
	return name
}

// origin is " (<kind> <ns>/<name>)" of the origin labels, or "".
func origin(labels map[string]string, kind string) string {
	ns, name := labels[v1alpha1.LabelOriginNamespace], labels[v1alpha1.LabelOriginName]
	if name == "" {
		return ""
	}
	if k := labels[v1alpha1.LabelOriginResourceKind]; k != "" {
		kind = k
	}
	return fmt.Sprintf(" (%s %s/%s)", kind, ns, name)
}
