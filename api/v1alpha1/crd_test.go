package v1alpha1_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

func validLB(name string) *kubelbv1alpha1.LoadBalancer {
	return &kubelbv1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: kubelbv1alpha1.LoadBalancerSpec{
			Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{
				AddressesReference: &corev1.ObjectReference{Name: "default"},
				Ports:              []kubelbv1alpha1.EndpointPort{{Name: "http", Port: 31080, Protocol: corev1.ProtocolTCP}},
			}},
			Ports: []kubelbv1alpha1.LoadBalancerPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
}

// TestCRDsAgainstAPIServer installs the generated CRDs into a real kube-apiserver and checks
// that their schemas accept what the contract allows and reject the rest with a clear message.
func TestCRDsAgainstAPIServer(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	c := hub.Client

	t.Run("all eight kinds are established with their scope", func(t *testing.T) {
		want := map[string]apiextensionsv1.ResourceScope{
			"loadbalancers": apiextensionsv1.NamespaceScoped, "routes": apiextensionsv1.NamespaceScoped,
			"addresses": apiextensionsv1.NamespaceScoped, "syncsecrets": apiextensionsv1.NamespaceScoped,
			"tenantstates": apiextensionsv1.NamespaceScoped, "tenants": apiextensionsv1.ClusterScoped,
			"configs": apiextensionsv1.NamespaceScoped, "addresspools": apiextensionsv1.ClusterScoped,
		}
		for plural, scope := range want {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: plural + ".kubelb.k8c.io"}, crd); err != nil {
				t.Fatalf("CRD %s: %v", plural, err)
			}
			if crd.Spec.Scope != scope {
				t.Errorf("%s scope = %s, want %s", plural, crd.Spec.Scope, scope)
			}
			if crd.Spec.Versions[0].Subresources == nil || crd.Spec.Versions[0].Subresources.Status == nil {
				t.Errorf("%s has no status subresource", plural)
			}
		}
		lb := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: "loadbalancers.kubelb.k8c.io"}, lb); err != nil {
			t.Fatal(err)
		}
		if got := lb.Spec.Names.ShortNames; len(got) != 1 || got[0] != "lb" {
			t.Errorf("LoadBalancer short names = %v, want [lb]", got)
		}
		var cols []string
		for _, col := range lb.Spec.Versions[0].AdditionalPrinterColumns {
			cols = append(cols, col.Name)
		}
		if got := strings.Join(cols, ","); !strings.HasPrefix(got, "OriginName,OriginNamespace,Hostname") {
			t.Errorf("LoadBalancer printer columns = %s", got)
		}
	})

	t.Run("a valid LoadBalancer is accepted with defaults", func(t *testing.T) {
		lb := validLB("valid")
		lb.Spec.Ports[0].Protocol = ""
		if err := c.Create(ctx, lb); err != nil {
			t.Fatalf("create: %v", err)
		}
		if lb.Spec.Type != corev1.ServiceTypeClusterIP {
			t.Errorf("type defaulted to %q, want ClusterIP", lb.Spec.Type)
		}
		if lb.Spec.Ports[0].Protocol != corev1.ProtocolTCP {
			t.Errorf("protocol defaulted to %q, want TCP", lb.Spec.Ports[0].Protocol)
		}
	})

	t.Run("a LoadBalancer with a healthCheckNodePort keeps it", func(t *testing.T) {
		lb := validLB("hc-port")
		lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		lb.Spec.HealthCheckNodePort = 32000
		if err := c.Create(ctx, lb); err != nil {
			t.Fatalf("create: %v", err)
		}
		got := &kubelbv1alpha1.LoadBalancer{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(lb), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.HealthCheckNodePort != 32000 {
			t.Errorf("healthCheckNodePort = %d, want 32000", got.Spec.HealthCheckNodePort)
		}
	})

	t.Run("a LoadBalancer with source ranges keeps them", func(t *testing.T) {
		lb := validLB("ranges")
		lb.Spec.SourceRanges = []string{"10.0.0.0/8", "2001:db8::/32"}
		if err := c.Create(ctx, lb); err != nil {
			t.Fatalf("create: %v", err)
		}
		got := &kubelbv1alpha1.LoadBalancer{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(lb), got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Spec.SourceRanges, lb.Spec.SourceRanges) {
			t.Errorf("sourceRanges = %v, want %v", got.Spec.SourceRanges, lb.Spec.SourceRanges)
		}
	})

	t.Run("a LoadBalancer with IP families keeps them", func(t *testing.T) {
		lb := validLB("families")
		lb.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		lb.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
		if err := c.Create(ctx, lb); err != nil {
			t.Fatalf("create: %v", err)
		}
		got := &kubelbv1alpha1.LoadBalancer{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(lb), got); err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(got.Spec.IPFamilyPolicy, "") != corev1.IPFamilyPolicyRequireDualStack || !slices.Equal(got.Spec.IPFamilies, lb.Spec.IPFamilies) {
			t.Errorf("ipFamilyPolicy, ipFamilies = %v, %v; want RequireDualStack, [IPv6 IPv4]", ptr.Deref(got.Spec.IPFamilyPolicy, ""), got.Spec.IPFamilies)
		}
	})

	rejected := []struct {
		name string
		obj  client.Object
		want string
	}{
		{"ipFamilyPolicy unknown", func() client.Object {
			lb := validLB("family-policy")
			lb.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicy("DualStack"))
			return lb
		}(), `spec.ipFamilyPolicy: Unsupported value: "DualStack"`},
		{"ipFamilies unknown", func() client.Object {
			lb := validLB("family-unknown")
			lb.Spec.IPFamilies = []corev1.IPFamily{"IPv5"}
			return lb
		}(), `spec.ipFamilies[0]: Unsupported value: "IPv5"`},
		{"ipFamilies repeated", func() client.Object {
			lb := validLB("family-repeated")
			lb.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv4Protocol}
			return lb
		}(), "ipFamilies must not repeat a family"},
		{"ipFamilies more than two", func() client.Object {
			lb := validLB("family-three")
			lb.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol, corev1.IPv4Protocol}
			return lb
		}(), "spec.ipFamilies: Too many: 3: must have at most 2 items"},
		{"protocol outside TCP|UDP", func() client.Object {
			lb := validLB("sctp")
			lb.Spec.Ports[0].Protocol = corev1.ProtocolSCTP
			return lb
		}(), `spec.ports[0].protocol: Unsupported value: "SCTP"`},
		{"endpoint port protocol outside TCP|UDP", func() client.Object {
			lb := validLB("sctp-endpoint")
			lb.Spec.Endpoints[0].Ports[0].Protocol = corev1.ProtocolSCTP
			return lb
		}(), `spec.endpoints[0].ports[0].protocol: Unsupported value: "SCTP"`},
		{"no endpoints", func() client.Object {
			lb := validLB("no-endpoints")
			lb.Spec.Endpoints = []kubelbv1alpha1.LoadBalancerEndpoints{}
			return lb
		}(), "spec.endpoints: Invalid value: 0: spec.endpoints in body should have at least 1 items"},
		{"port out of range", func() client.Object {
			lb := validLB("port-range")
			lb.Spec.Ports[0].Port = 70000
			return lb
		}(), "spec.ports[0].port: Invalid value: 70000: spec.ports[0].port in body should be less than or equal to 65535"},
		{"more than 64 source ranges", func() client.Object {
			lb := validLB("ranges-many")
			for i := range 65 {
				lb.Spec.SourceRanges = append(lb.Spec.SourceRanges, fmt.Sprintf("10.%d.0.0/16", i))
			}
			return lb
		}(), "spec.sourceRanges: Too many: 65: must have at most 64 items"},
		{"a source range longer than 64 characters", func() client.Object {
			lb := validLB("ranges-long")
			lb.Spec.SourceRanges = []string{strings.Repeat("1", 65)}
			return lb
		}(), "spec.sourceRanges[0]: Too long"},
		{"healthCheckNodePort out of range", func() client.Object {
			lb := validLB("hc-port-range")
			lb.Spec.HealthCheckNodePort = 70000
			return lb
		}(), "spec.healthCheckNodePort: Invalid value: 70000: spec.healthCheckNodePort in body should be less than or equal to 65535"},
		{"healthCheckNodePort negative", func() client.Object {
			lb := validLB("hc-port-negative")
			lb.Spec.HealthCheckNodePort = -1
			return lb
		}(), "spec.healthCheckNodePort in body should be greater than or equal to 1"},
		{"empty Addresses", &kubelbv1alpha1.Addresses{
			ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"},
			Spec:       kubelbv1alpha1.AddressesSpec{Addresses: []kubelbv1alpha1.EndpointAddress{}},
		}, "spec.addresses in body should have at least 1 items"},
		{"persistence type other than SourceIP", func() client.Object {
			lb := validLB("persistence")
			lb.Spec.Persistence = &kubelbv1alpha1.Persistence{Type: "Cookie"}
			return lb
		}(), `spec.persistence.type: Unsupported value: "Cookie"`},
	}
	for _, tc := range rejected {
		t.Run("rejects "+tc.name, func(t *testing.T) { wantRejected(t, c.Create(ctx, tc.obj), tc.want) })
	}

	t.Run("Tenant is cluster-scoped", func(t *testing.T) {
		tenant := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
		if err := c.Create(ctx, tenant); err != nil {
			t.Fatalf("creating cluster-scoped Tenant: %v", err)
		}
		// There is no namespaced path for Tenants: a request for one in a namespace is refused.
		dyn := dynamic.NewForConfigOrDie(hub.Config)
		gvr := kubelbv1alpha1.GroupVersion.WithResource("tenants")
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": kubelbv1alpha1.GroupVersion.String(), "kind": "Tenant",
			"metadata": map[string]any{"name": "b", "namespace": "default"},
		}}
		_, err := dyn.Resource(gvr).Namespace("default").Create(ctx, obj, metav1.CreateOptions{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("namespaced Tenant: error %v, want NotFound", err)
		}
	})

	t.Run("Config is namespaced", func(t *testing.T) {
		cfg := &kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
		err := c.Create(ctx, cfg)
		if err == nil || !strings.Contains(err.Error(), "namespace") {
			t.Fatalf("Config without namespace: error %v, want one about the namespace", err)
		}
	})

	t.Run("endpointPolicy entries must be CIDRs", func(t *testing.T) {
		good := &kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Name: "policy", Namespace: "default"},
			Spec: kubelbv1alpha1.ConfigSpec{EndpointPolicy: &kubelbv1alpha1.EndpointPolicy{
				Allow: []string{"127.0.0.0/8", "fd00::/64"}, Deny: []string{"127.0.0.2/32"}}}}
		if err := c.Create(ctx, good); err != nil {
			t.Fatalf("Config with CIDRs: %v", err)
		}
		for _, bad := range []string{"10.0.0.1", "not-a-cidr", "10.0.0.0/33"} {
			tn := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "policy"},
				Spec: kubelbv1alpha1.TenantSpec{EndpointPolicy: &kubelbv1alpha1.EndpointPolicy{Deny: []string{"10.0.0.0/8", bad}}}}
			err := c.Create(ctx, tn)
			if err == nil || !strings.Contains(err.Error(), "every entry must be a CIDR") {
				t.Errorf("Tenant with deny entry %q: error %v, want the CIDR message", bad, err)
			}
		}
		many := make([]string, 65)
		for i := range many {
			many[i] = "10.0.0.0/8"
		}
		tn := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "policy"},
			Spec: kubelbv1alpha1.TenantSpec{EndpointPolicy: &kubelbv1alpha1.EndpointPolicy{Allow: many}}}
		if err := c.Create(ctx, tn); err == nil || !strings.Contains(err.Error(), "must have at most 64 items") {
			t.Errorf("Tenant with 65 allow entries: error %v, want a maxItems error", err)
		}
	})
}

// TestAddressPoolCRD: the AddressPool sample is accepted as it is; the schema bounds the
// entries (at most 64, each at most 100 characters) and the Tenant's addressPool is a name.
// Whether an entry is a CIDR or a range is the controller's to say (a condition).
func TestAddressPoolCRD(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	c := hub.Client
	for _, obj := range readObjects(t, filepath.Join(testsupport.RepoRoot(), "config", "samples", "kubelb_v1alpha1_addresspool.yaml")) {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("the AddressPool sample is rejected: %v", err)
		}
	}
	pool := func(name string, addrs ...string) *kubelbv1alpha1.AddressPool {
		return &kubelbv1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kubelbv1alpha1.AddressPoolSpec{Addresses: addrs}}
	}
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("10.0.%d.0/24", i)
	}
	wantRejected(t, c.Create(ctx, pool("many", many...)), "must have at most 64 items")
	wantRejected(t, c.Create(ctx, pool("none", []string{}...)), "spec.addresses in body should have at least 1 items")
	wantRejected(t, c.Create(ctx, pool("long", strings.Repeat("1", 101))), "may not be more than 100 bytes")
	dup := pool("dup-namespaces", "10.0.0.0/28")
	dup.Spec.AllowedNamespaces = []string{"apps", "apps"}
	wantRejected(t, c.Create(ctx, dup), "Duplicate value")
	if err := c.Create(ctx, pool("entry-garbage", "not-an-address")); err != nil {
		t.Fatalf("an unreadable entry must reach the controller (it says so in a condition): %v", err)
	}
	tn := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "pool"},
		Spec: kubelbv1alpha1.TenantSpec{LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{AddressPool: ptr.To("Not A Name")}}}
	wantRejected(t, c.Create(ctx, tn), "spec.loadBalancer.addressPool in body should match")
	tn.Spec.LoadBalancer.AddressPool = ptr.To("edge-v4")
	if err := c.Create(ctx, tn); err != nil {
		t.Fatalf("Tenant with addressPool: %v", err)
	}
}

// wantRejected fails unless err is the API server's refusal containing want.
func wantRejected(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want rejection containing %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
}
