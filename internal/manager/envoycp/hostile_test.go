package envoycp_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/envoycp"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/translate"
)

// TestHostileTenantAddresses: tenant b (the attacker, spec.limits.addresses: 2) writes its
// Addresses "default" and then five more of 5000 addresses each; only the two oldest reach
// its Envoy input, and tenant a's (the victim's) input is its own Addresses alone. On the code
// before spec.limits.addresses, all six of b's were used.
func TestHostileTenantAddresses(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	addresses := func(ns, name string, n int) *v1alpha1.Addresses {
		a := &v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		for i := range n {
			a.Spec.Addresses = append(a.Spec.Addresses, v1alpha1.EndpointAddress{IP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)})
		}
		return a
	}
	createAll(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Labels: managedBy}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-b", Labels: managedBy}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}},
		&v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: v1alpha1.TenantSpec{Limits: v1alpha1.Limits{Addresses: ptr.To[int32](2)}}},
		addresses("tenant-a", v1alpha1.DefaultAddressesName, 3),
		addresses("tenant-b", v1alpha1.DefaultAddressesName, 3),
	)
	for i := range 5 {
		createAll(t, c, addresses("tenant-b", fmt.Sprintf("extra-%d", i), 5000))
	}
	opts := translate.Options{ListenerAddress: "127.0.0.1"}
	attacker, err := envoycp.BuildInput(ctx, c, c, managerNamespace, "tenant-b", opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for name := range attacker.Addresses {
		got = append(got, name)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{v1alpha1.DefaultAddressesName, "extra-0"}) {
		t.Errorf("tenant b's Addresses used: %v, want the two oldest [default extra-0]", got)
	}
	victim, err := envoycp.BuildInput(ctx, c, c, managerNamespace, "tenant-a", opts)
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := victim.Addresses[v1alpha1.DefaultAddressesName]; !ok || len(victim.Addresses) != 1 || len(a.Spec.Addresses) != 3 {
		t.Errorf("tenant a's Addresses %v", victim.Addresses)
	}
}
