package envoycp

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/translate"
)

// TestUpstreamSettings: on a real API server, the Config's spec.upstream (connect timeout,
// connection limit, UDP idle timeout, health check) reaches the translation of every tenant,
// a Tenant's spec.upstream overrides it field by field for that tenant only, and a tenant
// Service's annotations override both for its own LoadBalancer (an invalid one is reported
// InvalidAnnotation, a Warning the ccm turns into an Event, and the tenant's value applies).
// The API server refuses values out of range.
func TestUpstreamSettings(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	const ns, other = "tenant-a", "tenant-b"
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	upstreamCreate(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other, Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.LabelManagedByValue}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: upstreamManagerNS}},
	)

	// Out of range: refused by the CRDs' validation.
	for name, u := range map[string]v1alpha1.UpstreamSettings{
		"connect timeout too long":     {ConnectTimeout: dur(time.Hour)},
		"idle timeout too short":       {UDPIdleTimeout: dur(time.Millisecond)},
		"interval too short":           {HealthCheck: v1alpha1.UpstreamHealthCheck{Interval: dur(100 * time.Millisecond)}},
		"zero connections":             {MaxConnections: ptr.To[int32](0)},
		"threshold too high":           {HealthCheck: v1alpha1.UpstreamHealthCheck{UnhealthyThreshold: ptr.To[int32](101)}},
		"no-traffic interval too long": {HealthCheck: v1alpha1.UpstreamHealthCheck{NoTrafficInterval: dur(2 * time.Hour)}},
	} {
		cfg := &v1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Namespace: upstreamManagerNS, Name: v1alpha1.DefaultConfigName},
			Spec: v1alpha1.ConfigSpec{Upstream: u}}
		if err := c.Create(ctx, cfg); err == nil || !strings.Contains(err.Error(), "Invalid value") {
			t.Errorf("%s: a Config with %+v was not refused: %v", name, u, err)
			_ = c.Delete(ctx, cfg)
		}
		tn := &v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "refused"}, Spec: v1alpha1.TenantSpec{Upstream: u}}
		if err := c.Create(ctx, tn); err == nil {
			t.Errorf("%s: a Tenant with %+v was not refused", name, u)
			_ = c.Delete(ctx, tn)
		}
	}
	// A duration that is not one is refused too.
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "Config",
		"metadata": map[string]any{"namespace": upstreamManagerNS, "name": v1alpha1.DefaultConfigName},
		"spec":     map[string]any{"upstream": map[string]any{"connectTimeout": "soon"}},
	}}
	if err := c.Create(ctx, bad); err == nil {
		t.Error(`a Config with connectTimeout "soon" was not refused`)
	}

	upstreamCreate(t, c,
		&v1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Namespace: upstreamManagerNS, Name: v1alpha1.DefaultConfigName},
			Spec: v1alpha1.ConfigSpec{Upstream: v1alpha1.UpstreamSettings{
				ConnectTimeout: dur(2 * time.Second),
				MaxConnections: ptr.To[int32](1000),
				UDPIdleTimeout: dur(90 * time.Second),
				HealthCheck: v1alpha1.UpstreamHealthCheck{Interval: dur(3 * time.Second), Timeout: dur(time.Second),
					UnhealthyThreshold: ptr.To[int32](5), HealthyThreshold: ptr.To[int32](2), NoTrafficInterval: dur(10 * time.Second)},
			}}},
		&v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1alpha1.TenantSpec{Upstream: v1alpha1.UpstreamSettings{
			ConnectTimeout: dur(4 * time.Second),
			HealthCheck:    v1alpha1.UpstreamHealthCheck{Interval: dur(7 * time.Second)},
		}}},
	)
	for _, n := range []string{ns, other} {
		upstreamCreate(t, c, &v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: v1alpha1.DefaultAddressesName},
			Spec: v1alpha1.AddressesSpec{Addresses: []v1alpha1.EndpointAddress{{IP: "192.0.2.10"}}}})
	}
	lbs := []struct {
		ns, name    string
		port        int32
		annotations map[string]string
	}{
		{ns, "plain", 20001, nil},
		{ns, "tuned", 20002, map[string]string{
			v1alpha1.AnnotationConnectTimeout:      "250ms",
			v1alpha1.AnnotationHealthCheckInterval: "1s",
			v1alpha1.AnnotationMaxConnections:      "10",
		}},
		{ns, "unchecked", 20003, map[string]string{v1alpha1.AnnotationHealthCheckDisable: "true"}},
		{ns, "wrong", 20004, map[string]string{v1alpha1.AnnotationHealthCheckUnhealthyThreshold: "lots"}},
		{other, "plain", 20005, nil},
	}
	for _, l := range lbs {
		lb := loadBalancer(l.ns, l.name, l.port)
		lb.Annotations = l.annotations
		svc := hubService(lb)
		upstreamCreate(t, c, lb)
		upstreamCreate(t, c, svc)
	}

	base := translate.Options{ListenerAddress: "127.0.0.1", ConnectTimeout: 9 * time.Second}
	clusters := func(tenant string) (map[string]*ir.Cluster, ir.Problems) {
		t.Helper()
		in, err := BuildInput(ctx, c, c, upstreamManagerNS, tenant, base)
		if err != nil {
			t.Fatal(err)
		}
		res, err := translate.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*ir.Cluster{}
		for _, cl := range res.Config.Clusters {
			out[cl.Owners[0].Name] = cl
		}
		return out, res.Problems
	}
	check := func(what string, cl *ir.Cluster, connect time.Duration, maxConns uint32, hc *ir.HealthCheck) {
		t.Helper()
		if cl == nil {
			t.Fatalf("%s: no cluster", what)
		}
		if time.Duration(cl.ConnectTimeout) != connect || cl.MaxConnections != maxConns {
			t.Errorf("%s: connect timeout %v, max connections %d; want %v, %d", what, time.Duration(cl.ConnectTimeout), cl.MaxConnections, connect, maxConns)
		}
		if (cl.HealthCheck == nil) != (hc == nil) || (hc != nil && *cl.HealthCheck != *hc) {
			t.Errorf("%s: health check %+v, want %+v", what, cl.HealthCheck, hc)
		}
	}
	hc := func(interval time.Duration) *ir.HealthCheck {
		return &ir.HealthCheck{Interval: ir.Duration(interval), Timeout: ir.Duration(time.Second), UnhealthyThreshold: 5, HealthyThreshold: 2,
			NoTrafficInterval: ir.Duration(10 * time.Second)}
	}

	got, problems := clusters(ns)
	// Tenant a: the Tenant's connect timeout and interval over the Config's, the rest the Config's.
	check("tenant-a plain", got["plain"], 4*time.Second, 1000, hc(7*time.Second))
	check("tenant-a tuned (annotations)", got["tuned"], 250*time.Millisecond, 10, hc(time.Second))
	check("tenant-a unchecked (annotation)", got["unchecked"], 4*time.Second, 1000, nil)
	check("tenant-a wrong (invalid annotation)", got["wrong"], 4*time.Second, 1000, hc(7*time.Second))
	var reported bool
	for _, p := range problems {
		if p.Object.Name == "wrong" && p.Reason == translate.ReasonInvalidAnnotation && p.Severity == ir.SeverityWarning &&
			strings.Contains(p.Message, v1alpha1.AnnotationHealthCheckUnhealthyThreshold) && strings.Contains(p.Message, "5 applies") {
			reported = true
		} else if p.Object.Name != "wrong" {
			t.Errorf("unexpected problem %+v", p)
		}
	}
	if !reported {
		t.Errorf("the invalid annotation was not reported: %+v", problems)
	}
	// Tenant b has no Tenant: the Config's.
	got, _ = clusters(other)
	check("tenant-b plain", got["plain"], 2*time.Second, 1000, hc(3*time.Second))

	// The Tenant turns health checks off for its tenant; the Config's other fields stay.
	tn := &v1alpha1.Tenant{}
	if err := c.Get(ctx, client.ObjectKey{Name: "a"}, tn); err != nil {
		t.Fatal(err)
	}
	tn.Spec.Upstream.HealthCheck.Disable = ptr.To(true)
	if err := c.Update(ctx, tn); err != nil {
		t.Fatal(err)
	}
	got, _ = clusters(ns)
	check("tenant-a plain, checks off", got["plain"], 4*time.Second, 1000, nil)
	// ... and a Service turns them back on for its own LoadBalancer.
	lb := &v1alpha1.LoadBalancer{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "unchecked"}, lb); err != nil {
		t.Fatal(err)
	}
	lb.Annotations[v1alpha1.AnnotationHealthCheckDisable] = "false"
	if err := c.Update(ctx, lb); err != nil {
		t.Fatal(err)
	}
	got, _ = clusters(ns)
	check("tenant-a unchecked, annotation false", got["unchecked"], 4*time.Second, 1000, hc(7*time.Second))
}

const upstreamManagerNS = "kubelb"

func upstreamCreate(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}
