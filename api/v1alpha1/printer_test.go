package v1alpha1_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
)

// TestKubectlGetKubelb runs the real kubectl against a real API server with the generated
// CRDs: `kubectl get kubelb -A` lists objects of several kinds (the kubelb category) with
// their printer columns, the short names work, and `kubectl explain` tells what the
// condition reasons mean.
func TestKubectlGetKubelb(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	c := hub.Client
	kubectl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(testenv.AssetsDir(t), "kubectl"), append([]string{"--kubeconfig", hub.Kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	now := metav1.Now()
	cond := func(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: "m", LastTransitionTime: now}
	}

	lb := validLB("svc-uid")
	lb.Labels = map[string]string{"kubelb.k8c.io/origin-name": "web", "kubelb.k8c.io/origin-ns": "shop"}
	if err := c.Create(ctx, lb); err != nil {
		t.Fatal(err)
	}
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	lb.Status.Conditions = []metav1.Condition{cond("Ready", metav1.ConditionTrue, "AddressAssigned"), cond("Programmed", metav1.ConditionFalse, "Rejected")}
	if err := c.Status().Update(ctx, lb); err != nil {
		t.Fatal(err)
	}

	route := &kubelbv1alpha1.Route{ObjectMeta: metav1.ObjectMeta{Name: "ing-uid", Namespace: "default", Labels: map[string]string{
		"kubelb.k8c.io/origin-name": "shop-ing", "kubelb.k8c.io/origin-ns": "shop", "kubelb.k8c.io/origin-resource-kind": "Ingress"}}}
	route.Spec.Source.Kubernetes = &kubelbv1alpha1.KubernetesSource{Route: unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": map[string]any{"name": "shop-ing", "namespace": "shop"}}}}
	if err := c.Create(ctx, route); err != nil {
		t.Fatal(err)
	}
	route.Status.Resources.Route.Conditions = []metav1.Condition{cond("Programmed", metav1.ConditionTrue, "Programmed")}
	if err := c.Status().Update(ctx, route); err != nil {
		t.Fatal(err)
	}

	tenant := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acme"}}
	if err := c.Create(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	tenant.Status.Phase = kubelbv1alpha1.TenantPhaseReady
	tenant.Status.Conditions = []metav1.Condition{cond("Ready", metav1.ConditionTrue, "Provisioned")}
	tenant.Status.LoadBalancers, tenant.Status.Routes = 7, 3
	if err := c.Status().Update(ctx, tenant); err != nil {
		t.Fatal(err)
	}

	out := kubectl("get", "kubelb", "-A")
	t.Logf("kubectl get kubelb -A:\n%s", out)
	for _, want := range []string{
		"loadbalancer.kubelb.k8c.io/svc-uid", "route.kubelb.k8c.io/ing-uid", "tenant.kubelb.k8c.io/acme",
		"ADDRESS", "READY", "PROGRAMMED", "192.0.2.10", "ORIGINRESOURCE", "PHASE", "LOADBALANCERS", "ROUTES",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get kubelb -A does not show %q", want)
		}
	}
	lbLine := lineWith(out, "loadbalancer.kubelb.k8c.io/svc-uid")
	if f := strings.Fields(lbLine); !strings.Contains(lbLine, "web") || !strings.Contains(lbLine, "True") || !strings.Contains(lbLine, "False") || len(f) < 7 {
		t.Errorf("LoadBalancer row = %q, want origin web/shop, the address, Ready True and Programmed False", lbLine)
	}
	if l := lineWith(out, "route.kubelb.k8c.io/ing-uid"); !strings.Contains(l, "Ingress") || !strings.Contains(l, "True") {
		t.Errorf("Route row = %q, want kind Ingress and Programmed True", l)
	}
	if l := lineWith(out, "tenant.kubelb.k8c.io/acme"); !strings.Contains(l, "Ready") || !strings.Contains(l, "True") || !strings.Contains(l, " 7 ") || !strings.Contains(l, " 3 ") {
		t.Errorf("Tenant row = %q, want phase Ready, Ready True, 7 LoadBalancers and 3 Routes", l)
	}

	for _, short := range []string{"lb", "klroute", "kltenant", "klstate", "klpool", "kladdr", "klsync", "klconfig"} {
		kubectl("get", short, "-A")
	}

	explain := kubectl("explain", "loadbalancers.status.conditions")
	for _, want := range []string{"WaitingForAddress", "Programmed", "Rejected", "CertificateNotFound"} {
		if !strings.Contains(explain, want) {
			t.Errorf("kubectl explain loadbalancers.status.conditions does not name %s:\n%s", want, explain)
		}
	}
}

func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
