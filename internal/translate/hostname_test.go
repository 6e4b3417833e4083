package translate_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/translate"
)

func TestLoadBalancerHostname(t *testing.T) {
	t.Parallel()
	const uid = "6e0a2f34-1c1e-4b8a-9f0e-2f1d3c4b5a61"
	lb := func(name, hostname string) *v1alpha1.LoadBalancer {
		return &v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.LoadBalancerSpec{Hostname: hostname}}
	}
	explicit := translate.DNS{AllowExplicitHostnames: true}
	wildcard := translate.DNS{WildcardDomain: "*.lb.example.com"}
	both := translate.DNS{WildcardDomain: "*.lb.example.com", AllowExplicitHostnames: true}
	reserved := translate.DNS{AllowExplicitHostnames: true, ReservedDomains: []string{"hub.example.net.", "*.lb.example.com"}}
	long := func(n int) string { return strings.Repeat("a", n) }

	for name, c := range map[string]struct {
		lb         *v1alpha1.LoadBalancer
		tenant     string
		dns        translate.DNS
		want       string
		wantErr    string // a part of the error; "" for none
		notAllowed bool
	}{
		"no hostname, no wildcard domain: none":       {lb: lb(uid, ""), tenant: "a", dns: explicit, want: ""},
		"explicit, allowed":                           {lb: lb(uid, "web.example.com"), tenant: "a", dns: explicit, want: "web.example.com"},
		"explicit is normalized":                      {lb: lb(uid, " Web.Example.COM. "), tenant: "a", dns: explicit, want: "web.example.com"},
		"explicit wins over the wildcard domain":      {lb: lb(uid, "web.example.com"), tenant: "a", dns: both, want: "web.example.com"},
		"explicit, not allowed":                       {lb: lb(uid, "web.example.com"), tenant: "a", dns: wildcard, notAllowed: true},
		"explicit, not allowed, no wildcard":          {lb: lb(uid, "web.example.com"), tenant: "a", dns: translate.DNS{}, notAllowed: true},
		"explicit wildcard":                           {lb: lb(uid, "*.example.com"), tenant: "a", dns: explicit, wantErr: "wildcard"},
		"explicit single label":                       {lb: lb(uid, "localhost"), tenant: "a", dns: explicit, wantErr: "single label"},
		"explicit with an underscore":                 {lb: lb(uid, "my_app.example.com"), tenant: "a", dns: explicit, wantErr: "not a DNS name"},
		"explicit with a label of 64 characters":      {lb: lb(uid, long(64)+".example.com"), tenant: "a", dns: explicit, wantErr: "longer than 63"},
		"explicit of 254 characters":                  {lb: lb(uid, strings.Repeat(long(62)+".", 4)+"com"), tenant: "a", dns: explicit, wantErr: "not a DNS name"},
		"explicit IP address":                         {lb: lb(uid, "10.0.0.1"), tenant: "a", dns: explicit, wantErr: "IP address"},
		"explicit in the cluster domain":              {lb: lb(uid, "kubernetes.default.svc.cluster.local"), tenant: "a", dns: explicit, wantErr: "reserved by the hub"},
		"explicit Service name":                       {lb: lb(uid, "kubelb.kubelb-system.svc"), tenant: "a", dns: explicit, wantErr: "reserved by the hub"},
		"explicit kubernetes.default":                 {lb: lb(uid, "kubernetes.default"), tenant: "a", dns: explicit, wantErr: "reserved by the hub"},
		"explicit metadata name":                      {lb: lb(uid, "Metadata.Google.Internal."), tenant: "a", dns: explicit, wantErr: "reserved by the hub"},
		"explicit under a reserved domain":            {lb: lb(uid, "xds.hub.example.net"), tenant: "a", dns: reserved, wantErr: "reserved by the hub"},
		"explicit, the reserved wildcard's apex":      {lb: lb(uid, "lb.example.com"), tenant: "a", dns: reserved, wantErr: "reserved by the hub"},
		"explicit, next to a reserved domain":         {lb: lb(uid, "myhub.example.net"), tenant: "a", dns: reserved, want: "myhub.example.net"},
		"generated":                                   {lb: lb(uid, ""), tenant: "a", dns: wildcard, want: uid + ".a.lb.example.com"},
		"generated from a domain without *.":          {lb: lb(uid, ""), tenant: "a", dns: translate.DNS{WildcardDomain: "LB.example.com."}, want: uid + ".a.lb.example.com"},
		"generated, the domain is invalid":            {lb: lb(uid, ""), tenant: "a", dns: translate.DNS{WildcardDomain: "*.lb_example.com"}, wantErr: "wildcard domain"},
		"generated, the domain is a double wildcard":  {lb: lb(uid, ""), tenant: "a", dns: translate.DNS{WildcardDomain: "*.*.example.com"}, wantErr: "wildcard domain"},
		"generated, too long with a long tenant name": {lb: lb(uid, ""), tenant: long(64), dns: wildcard, wantErr: "generated hostname"},
		"generated, a LoadBalancer name with dots":    {lb: lb("web.shop", ""), tenant: "a", dns: wildcard, want: "web.shop.a.lb.example.com"},
		"generated, too long overall":                 {lb: lb(uid, ""), tenant: "a", dns: translate.DNS{WildcardDomain: strings.Repeat(long(60)+".", 4) + "com"}, wantErr: "generated hostname"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := translate.LoadBalancerHostname(c.lb, c.tenant, c.dns)
			switch {
			case c.notAllowed:
				if !errors.Is(err, translate.ErrExplicitHostnameNotAllowed) {
					t.Fatalf("got %q, %v; want ErrExplicitHostnameNotAllowed", got, err)
				}
			case c.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, c.wantErr)
				}
			case err != nil:
				t.Fatalf("unexpected error: %v", err)
			case got != c.want:
				t.Fatalf("got %q, want %q", got, c.want)
			}
			if err != nil && got != "" {
				t.Fatalf("an error with hostname %q", got)
			}
			if got != "" && len(validation.IsDNS1123Subdomain(got)) > 0 {
				t.Fatalf("hostname %q is not a DNS-1123 subdomain", got)
			}
		})
	}
}

// Two LoadBalancers of one name (the Layer 4 front end serves the older only) never give two
// hostname clusters of one name.
func TestLoadBalancerHostnameSameName(t *testing.T) {
	t.Parallel()
	cert, _ := testCert(t, "a.example.com")
	lb := func(host string, created int64) v1alpha1.LoadBalancer {
		return v1alpha1.LoadBalancer{
			ObjectMeta: metav1.ObjectMeta{Name: "lb", CreationTimestamp: metav1.Unix(created, 0)},
			Spec: v1alpha1.LoadBalancerSpec{Hostname: host, Ports: []v1alpha1.LoadBalancerPort{{Port: 80}},
				Endpoints: []v1alpha1.LoadBalancerEndpoints{{Addresses: []v1alpha1.EndpointAddress{{IP: "10.0.0.1"}}, Ports: []v1alpha1.EndpointPort{{Port: 30080}}}}},
		}
	}
	in := translate.Input{
		Tenant:        "tenant-a",
		LoadBalancers: []v1alpha1.LoadBalancer{lb("a.example.com", 1), lb("b.example.com", 2)},
		RouteServices: []corev1.Service{{
			ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.IngressServiceName, Labels: map[string]string{v1alpha1.LabelIngressService: "true"}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(20443)}}},
		}},
		DNS:             translate.DNS{AllowExplicitHostnames: true},
		HostnameSecrets: map[string]corev1.Secret{"lb": {Data: cert}},
	}
	r, err := translate.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Config.Validate(); err != nil {
		t.Fatalf("invalid IR: %v", err)
	}
	var names [][]string
	for _, l := range r.Config.Listeners {
		for _, s := range l.TLS {
			names = append(names, s.ServerNames)
		}
	}
	if len(names) != 1 || len(names[0]) != 1 || names[0][0] != "a.example.com" {
		t.Fatalf("TLS server names %v, want the older LoadBalancer's a.example.com only", names)
	}
}
