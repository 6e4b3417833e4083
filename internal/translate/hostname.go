package translate

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
)

// DNS are the tenant's DNS settings that decide LoadBalancer hostnames (Config and Tenant
// spec.dns, the Tenant's overriding the Config's). The zero value gives no hostnames but
// explicit ones being refused.
type DNS struct {
	// WildcardDomain makes a hostname "<lb name>.<tenant name>.<WildcardDomain>" for every
	// LoadBalancer without spec.hostname; "" makes none. "*.example.com" and "example.com"
	// mean the same.
	WildcardDomain string `json:"wildcardDomain,omitempty"`
	// AllowExplicitHostnames lets LoadBalancers ask for a hostname of their own
	// (spec.hostname); otherwise such a LoadBalancer gets no hostname and a problem.
	AllowExplicitHostnames bool `json:"allowExplicitHostnames,omitempty"`
	// ReservedDomains are domains an explicit hostname may not be or be under, besides
	// BuiltinReservedDomains ("*.example.com" and "example.com" mean the same): the hub's
	// own names, and the wildcard domains whose names are generated.
	ReservedDomains []string `json:"reservedDomains,omitempty"`
}

// IsZero reports whether the settings give no hostname at all (no wildcard domain, no
// explicit hostnames); reserved domains alone do not count.
func (d DNS) IsZero() bool { return d.WildcardDomain == "" && !d.AllowExplicitHostnames }

// BuiltinReservedDomains are the domains no tenant's explicit hostname may be or be under:
// the hub's in-cluster names (svc, cluster.local, kubernetes.default), names that never
// leave a host or a site (localhost, local, internal: also the metadata servers of clouds,
// such as metadata.google.internal) and reverse DNS (arpa).
var BuiltinReservedDomains = []string{"svc", "local", "cluster.local", "kubernetes.default", "localhost", "internal", "arpa"}

// ErrReservedHostname is returned by LoadBalancerHostname for a spec.hostname that is, or is
// under, a domain reserved by the hub.
var ErrReservedHostname = errors.New("is reserved by the hub")

// ReservedDomain returns the reserved domain (BuiltinReservedDomains, then reserved) that
// host is or is under, "" when none.
func ReservedDomain(host string, reserved []string) string {
	for _, list := range [][]string{BuiltinReservedDomains, reserved} {
		for _, d := range list {
			d = strings.TrimPrefix(strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), "."), "*.")
			if d != "" && (host == d || strings.HasSuffix(host, "."+d)) {
				return d
			}
		}
	}
	return ""
}

// Reasons of LoadBalancer hostname problems (Warnings on the LoadBalancer, section
// "hostname": its ports are served, its hostname is not).
const (
	// ReasonInvalidHostname: spec.hostname (or the generated hostname) is not a usable DNS
	// name, or explicit hostnames are not allowed.
	ReasonInvalidHostname = "InvalidHostname"
	// ReasonHostnameConflict: an Ingress, or an older LoadBalancer, already serves the host.
	ReasonHostnameConflict = "HostnameConflict"
	// ReasonHostnameNoHTTPPort: the LoadBalancer has no TCP port to serve on its hostname.
	ReasonHostnameNoHTTPPort = "HostnameNoHTTPPort"
)

// ErrExplicitHostnameNotAllowed is returned by LoadBalancerHostname for a spec.hostname when
// the tenant's DNS settings do not allow explicit hostnames.
var ErrExplicitHostnameNotAllowed = errors.New("explicit hostnames are not allowed for this tenant (dns.allowExplicitHostnames)")

// LoadBalancerHostname is the hostname a LoadBalancer is served on (the LoadBalancer
// controller reports the same in status.hostname): spec.hostname when the tenant allows
// explicit hostnames, else, without spec.hostname, "<lb name>.<tenant name>.<wildcard
// domain>" when the tenant has a wildcard domain, else none (""). tenantName is the Tenant's
// name (without the "tenant-" prefix). The hostname is lower case, without a trailing dot,
// a DNS-1123 subdomain of at least two labels of at most 63 characters each, and never a
// wildcard or an IP address; anything else is an error.
func LoadBalancerHostname(lb *v1alpha1.LoadBalancer, tenantName string, dns DNS) (string, error) {
	if h := lb.Spec.Hostname; h != "" {
		if !dns.AllowExplicitHostnames {
			return "", ErrExplicitHostnameNotAllowed
		}
		h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
		if err := checkHostname(h); err != nil {
			return "", fmt.Errorf("spec.hostname %q %w", truncate(lb.Spec.Hostname), err)
		}
		if d := ReservedDomain(h, dns.ReservedDomains); d != "" {
			return "", fmt.Errorf("spec.hostname %q %w (the domain %s and its names are the hub's own or generated for LoadBalancers without spec.hostname); choose a hostname outside it",
				truncate(lb.Spec.Hostname), ErrReservedHostname, d)
		}
		return h, nil
	}
	domain := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(dns.WildcardDomain)), ".")
	domain = strings.TrimPrefix(domain, "*.")
	if domain == "" {
		return "", nil
	}
	if err := checkHostname(domain); err != nil {
		return "", fmt.Errorf("the wildcard domain %q %w", truncate(dns.WildcardDomain), err)
	}
	h := strings.ToLower(lb.Name) + "." + strings.ToLower(tenantName) + "." + domain
	if err := checkHostname(h); err != nil {
		return "", fmt.Errorf("the generated hostname %q %w", truncate(h), err)
	}
	return h, nil
}

// checkHostname says why h is not a usable hostname.
func checkHostname(h string) error {
	if strings.Contains(h, "*") {
		return errors.New("is a wildcard; a hostname must name one host")
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return errors.New("is an IP address; a hostname must be a DNS name")
	}
	if errs := validation.IsDNS1123Subdomain(h); len(errs) > 0 {
		return fmt.Errorf("is not a DNS name: %s", truncate(strings.Join(errs, "; ")))
	}
	labels := strings.Split(h, ".")
	if len(labels) < 2 {
		return errors.New("has a single label; a hostname needs a domain")
	}
	for _, l := range labels {
		if len(l) > validation.DNS1123LabelMaxLength {
			return fmt.Errorf("has a label longer than %d characters", validation.DNS1123LabelMaxLength)
		}
	}
	return nil
}

// keepsClientAddress reports whether a hub Service hands Envoy the clients' own addresses:
// of type LoadBalancer or NodePort with externalTrafficPolicy Local (with Cluster, a node
// forwarding to an Envoy pod elsewhere replaces the address by its own; a ClusterIP Service
// is reached from inside the hub).
func keepsClientAddress(svc *corev1.Service) bool {
	return svc != nil && (svc.Spec.Type == corev1.ServiceTypeLoadBalancer || svc.Spec.Type == corev1.ServiceTypeNodePort) &&
		svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// hostnamePort picks the LoadBalancer port served on its hostname: the TCP port named
// "http", else TCP port 80, else the first TCP port.
func hostnamePort(lb *v1alpha1.LoadBalancer) (portSpec, bool) {
	named, port80, first := -1, -1, -1
	for i, p := range lb.Spec.Ports {
		if v1alpha1.ProtocolOrTCP(p.Protocol) != corev1.ProtocolTCP || p.Port < 1 || p.Port > 65535 {
			continue
		}
		if p.Name == "http" && named < 0 {
			named = i
		}
		if p.Port == 80 && port80 < 0 {
			port80 = i
		}
		if first < 0 {
			first = i
		}
	}
	pick := first
	if named >= 0 {
		pick = named
	} else if port80 >= 0 {
		pick = port80
	}
	if pick < 0 {
		return portSpec{}, false
	}
	p := lb.Spec.Ports[pick]
	return portSpec{index: pick, name: p.Name, protocol: corev1.ProtocolTCP, port: p.Port}, true
}

// loadBalancerHostnames serves the HTTP port of every LoadBalancer with a hostname over
// HTTPS on the tenant's Ingress HTTPS listener, one SNI chain each, proxied as HTTP/1.1 to
// the port's endpoints (the tenant nodes' NodePort, as the Layer 4 listener, with the same
// PROXY protocol setting and health check). Problems are Warnings on the LoadBalancer's
// section "hostname": its ports are served either way.
func (t *l7) loadBalancerHostnames(st *ingressState, httpsPort uint32) {
	// Without a wildcard domain only a spec.hostname gives a hostname (LoadBalancerHostname):
	// a tenant without any is not walked (in age order) at all.
	if strings.TrimPrefix(strings.TrimSuffix(strings.ToLower(strings.TrimSpace(t.in.DNS.WildcardDomain)), "."), "*.") == "" {
		any := false
		for i := range t.in.LoadBalancers {
			any = any || t.in.LoadBalancers[i].Spec.Hostname != ""
		}
		if !any {
			return
		}
	}
	tenantName := hubnames.TenantName(t.in.Tenant)
	lbs := make([]*v1alpha1.LoadBalancer, 0, len(t.in.LoadBalancers))
	for i := range t.in.LoadBalancers {
		lbs = append(lbs, &t.in.LoadBalancers[i])
	}
	slices.SortStableFunc(lbs, func(a, b *v1alpha1.LoadBalancer) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	l4 := &l4{in: t.in, opts: t.opts, expander: t.expander} // for endpoints; its problems are the Layer 4 front end's
	claimed := map[string]string{}
	seen := map[string]bool{}
	for _, lb := range lbs {
		if len(validation.IsDNS1123Subdomain(lb.Name)) > 0 || seen[lb.Name] {
			continue // the Layer 4 front end reported it
		}
		seen[lb.Name] = true
		ref := ir.ObjectRef{Kind: KindLoadBalancer, Namespace: t.in.Tenant, Name: lb.Name, Section: "hostname"}
		warn := func(reason, format string, args ...any) {
			t.problems.Add(ref, ir.SeverityWarning, reason, format+"; the hostname is not served (the ports are)", args...)
		}
		host, err := LoadBalancerHostname(lb, tenantName, t.in.DNS)
		if err != nil {
			warn(ReasonInvalidHostname, "%s", err.Error())
			continue
		}
		if host == "" {
			continue
		}
		ps, ok := hostnamePort(lb)
		if !ok {
			if lb.Spec.Hostname != "" { // a generated hostname of a UDP-only LoadBalancer is simply not served
				warn(ReasonHostnameNoHTTPPort, "the LoadBalancer has no TCP port to serve on %s", host)
			}
			continue
		}
		if vh, ok := st.vhosts[host]; ok && (len(vh.paths) > 0 || vh.fallback != nil) {
			warn(ReasonHostnameConflict, "host %s is served by an Ingress", host)
			continue
		}
		if c, ok := st.sni[host]; ok {
			warn(ReasonHostnameConflict, "host %s is served over HTTPS by %s", host, c.by)
			continue
		}
		if other, ok := claimed[host]; ok {
			warn(ReasonHostnameConflict, "host %s is the hostname of the older LoadBalancer %s", host, other)
			continue
		}
		claimed[host] = lb.Name
		if httpsPort == 0 {
			if exhaustedPort(t.routeService(""), 443, corev1.ProtocolTCP) {
				warn(ReasonListenerPortNotAllocated, "the hub's listener port range has no port left for port 443 of the tenant's Ingress Service %s", v1alpha1.IngressServiceName)
			} else {
				warn(ReasonPortPending, "the tenant's Ingress Service %s has no listener port for port 443 yet", v1alpha1.IngressServiceName)
			}
			continue
		}
		secretName := hubnames.HostnameSecretName(lb.Name)
		sec, ok := t.in.HostnameSecrets[lb.Name]
		if !ok {
			warn(ReasonCertificateNotFound, "the certificate Secret %s/%s for %s does not exist yet", t.in.Tenant, secretName, host)
			continue
		}
		crt, key := sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey]
		if _, err := tls.X509KeyPair(crt, key); err != nil {
			warn(ReasonInvalidCertificate, "the Secret %s/%s does not hold a usable certificate and key (tls.crt, tls.key): %s", t.in.Tenant, secretName, truncate(err.Error()))
			continue
		}
		eps := l4.endpoints(lb, ps)
		if len(eps) == 0 {
			t.problems.Add(ref, ir.SeverityWarning, ReasonNoEndpoints, "the hostname %s has no usable endpoints; requests fail until the tenant has Ready nodes with valid addresses", host)
		}
		name := fmt.Sprintf("%s-http-%d", lb.Name, ps.port)
		if _, taken := t.clusterIndex()[name]; taken { // only crafted Route and Service names get here
			warn(ReasonHostnameConflict, "the cluster name %s is already used by a route backend", name)
			continue
		}
		settings := l4.settings(lb)
		if settings.rangesInvalid {
			continue // fail closed; the Layer 4 front end reported it
		}
		if len(settings.sourceRanges) > 0 && !keepsClientAddress(t.routeService("")) {
			t.problems.Add(ref, ir.SeverityWarning, ReasonClientAddressUnknown,
				"the hostname is served through the tenant's Ingress Service %s, which does not keep the clients' addresses (externalTrafficPolicy Local on a Service of type LoadBalancer or NodePort): the hub's nodes may replace them by their own, so spec.sourceRanges may refuse allowed clients on %s (its ports keep the addresses)",
				v1alpha1.IngressServiceName, host)
		}
		ps.protocol = "HTTP"
		// The same endpoints as the Layer 4 port, with its PROXY protocol and health check.
		c := &ir.Cluster{
			Name:      name,
			StatName:  statName(lb, ps),
			Protocol:  ir.UpstreamHTTP1,
			Owners:    []ir.ObjectRef{ref},
			Endpoints: eps,
		}
		c.ConnectTimeout = ir.Duration(settings.opts.ConnectTimeout)
		c.MaxConnections = settings.opts.MaxConnectionsPerCluster
		c.ProxyProtocol = settings.proxyProtocol
		c.HealthCheck = l4.healthCheck(settings, false)
		t.clusters[name] = c
		t.cfg.Clusters = append(t.cfg.Clusters, c)
		irSecret := "hostname-" + lb.Name
		secret := &ir.Secret{Name: irSecret, Owners: []ir.ObjectRef{ref}, CertChain: crt, PrivateKey: key}
		t.secrets[irSecret] = secret
		t.cfg.Secrets = append(t.cfg.Secrets, secret)
		st.sni[host] = sniClaim{secret: "LoadBalancer " + lb.Name, by: "LoadBalancer " + lb.Name}
		st.chains[irSecret] = &ingressChain{secret: irSecret, hosts: []string{host}, vhost: &ir.VirtualHost{
			Name:    host,
			Domains: []string{host},
			Routes: []*ir.Route{{
				Name:     lb.Name + "/hostname",
				Owners:   []ir.ObjectRef{ref},
				Match:    ir.RouteMatch{PathPrefix: "/"},
				Backends: []ir.WeightedCluster{{Cluster: name, Weight: 1}},
				Timeout:  ir.Duration(t.opts.RequestTimeout),
				// Only the LoadBalancer's clients (the peer's address; 403 for others).
				SourceRanges: settings.sourceRanges,
			}},
		}}
		st.httpsOwners = append(st.httpsOwners, ref)
	}
}
