package settings

import (
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// NotYet returns the fields of config and tenant (either may be nil) that are set but not
// implemented yet, so the manager ignores them: the Gateway API default gateway,
// dns.useCertificateAnnotations, the Config's Envoy maxResponseHeadersKb (request header limits
// are applied) and any topology but shared (podMonitor is the chart's: it renders the PodMonitor). A
// path is the object's kind and the field's JSON path, e.g. "Config spec.gatewayAPI.defaultGateway" or
// "Tenant spec.dns.useCertificateAnnotations"; Config's come first, each in a fixed order. A pointer
// counts as set when it is not nil, a bool when it is true.
func NotYet(config *kubelbv1alpha1.Config, tenant *kubelbv1alpha1.Tenant) []string {
	var out []string
	if config != nil {
		s := &config.Spec
		out = append(out, notYetShared("Config", s.Ingress, s.GatewayAPI, s.DNS, s.Certificates)...)
		e := &s.EnvoyProxy
		if e.Topology != "" && e.Topology != kubelbv1alpha1.EnvoyProxyTopologyShared {
			out = append(out, "Config spec.envoyProxy.topology")
		}
		if e.HeaderLimits != nil && e.HeaderLimits.MaxResponseHeadersKb != nil {
			out = append(out, "Config spec.envoyProxy.headerLimits.maxResponseHeadersKb")
		}
	}
	if tenant != nil {
		s := &tenant.Spec
		out = append(out, notYetShared("Tenant", s.Ingress, s.GatewayAPI.GatewayAPISettings, s.DNS, s.Certificates)...)
		if s.EnvoyProxy.HeaderLimits != nil && s.EnvoyProxy.HeaderLimits.MaxResponseHeadersKb != nil {
			out = append(out, "Tenant spec.envoyProxy.headerLimits.maxResponseHeadersKb")
		}
	}
	return out
}

// notYetShared returns the not-yet fields that Config and Tenant specs have in common.
func notYetShared(kind string, _ kubelbv1alpha1.IngressSettings, gw kubelbv1alpha1.GatewayAPISettings,
	dns kubelbv1alpha1.DNSSettings, _ kubelbv1alpha1.CertificatesSettings) []string {
	var out []string
	add := func(set bool, path string) {
		if set {
			out = append(out, kind+" spec."+path)
		}
	}
	// ingress.class/disable and gatewayAPI.class/disable are implemented (the Route
	// controller's hub Services).
	add(gw.DefaultGateway != nil, "gatewayAPI.defaultGateway")
	// dns.wildcardDomain, allowExplicitHostnames, useDNSAnnotations and
	// certificates.defaultClusterIssuer are implemented (LoadBalancer hostnames).
	add(dns.UseCertificateAnnotations != nil, "dns.useCertificateAnnotations")
	return out
}

// NotYetWarner logs the not-yet fields (NotYet) of a Config or Tenant once per generation of
// the object, not on every reconcile. Its zero value is ready; it is safe for concurrent use.
type NotYetWarner struct {
	mu   sync.Mutex
	seen map[types.UID]int64
}

// Warn logs, once per object generation, the fields of config and tenant (either may be nil)
// that are accepted but not implemented yet.
func (w *NotYetWarner) Warn(log logr.Logger, config *kubelbv1alpha1.Config, tenant *kubelbv1alpha1.Tenant) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen == nil {
		w.seen = map[types.UID]int64{}
	}
	if config != nil && w.seen[config.UID] != config.Generation {
		w.seen[config.UID] = config.Generation
		if fields := NotYet(config, nil); len(fields) > 0 {
			log.Info("WARNING: these settings are accepted but not implemented yet, and are ignored", "config", config.Name, "fields", fields)
		}
	}
	if tenant != nil && w.seen[tenant.UID] != tenant.Generation {
		w.seen[tenant.UID] = tenant.Generation
		if fields := NotYet(nil, tenant); len(fields) > 0 {
			log.Info("WARNING: these settings are accepted but not implemented yet, and are ignored", "tenant", tenant.Name, "fields", fields)
		}
	}
}
