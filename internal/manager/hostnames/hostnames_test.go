package hostnames_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/hostnames"
	"kubelb.dev/kubelb/internal/testenv"
)

// TestHostnamesHeldElsewhere: the oldest claim whose tenant may have the hostname holds it
// hub-wide (ties by namespace); an older claim of a tenant without explicit hostnames, or
// under a domain reserved for it, or being deleted, holds nothing; spelling does not matter.
func TestHostnamesHeldElsewhere(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lb := func(ns, name, host string, age int) *kubelbv1alpha1.LoadBalancer {
		return &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Second))},
			Spec: kubelbv1alpha1.LoadBalancerSpec{Hostname: host}}
	}
	explicit := kubelbv1alpha1.TenantSpec{DNS: kubelbv1alpha1.DNSSettings{AllowExplicitHostnames: ptr.To(true)}}
	objs := []client.Object{
		&kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: explicit},
		&kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: explicit},
		&kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, // no explicit hostnames
		&kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: kubelbv1alpha1.TenantSpec{DNS: kubelbv1alpha1.DNSSettings{
			AllowExplicitHostnames: ptr.To(true), ReservedDomains: []string{"example.net"}}}},
		lb("tenant-c", "first", "shop.example.org", 0),  // oldest, but c may not have it
		lb("tenant-d", "early", "api.example.net", 0),   // reserved for d
		lb("tenant-a", "shop", "SHOP.example.org.", 5),  // the owner
		lb("tenant-a", "api", "api.example.net", 9),     // the owner: d's claim is invalid
		lb("tenant-a", "tie", "tie.example.org", 7),     // same age as b's: namespace decides
		lb("tenant-b", "tie", "tie.example.org", 7),     // loses the tie
		lb("tenant-b", "steal", "shop.example.org", 6),  // younger: held
		lb("tenant-b", "api", "api.example.net", 10),    // younger: held
		lb("tenant-b", "early", "early.example.org", 1), // older than a's: a's is held
		lb("tenant-a", "late", "early.example.org", 2),  // held by b
		lb("tenant-b", "own", "own.example.org", 3),     // nobody else
		lb("tenant-a", "other", "", 0),                  // no explicit hostname
	}
	gone := lb("tenant-b", "gone", "gone.example.org", 0)
	gone.DeletionTimestamp, gone.Finalizers = &metav1.Time{Time: t0}, []string{"example.com/keep"}
	objs = append(objs, gone, lb("tenant-a", "gone", "gone.example.org", 4))
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(objs...).
		WithIndex(&kubelbv1alpha1.LoadBalancer{}, hostnames.IndexLoadBalancerHostname, hostnames.HostnameIndex).Build()

	held := func(ns string) []string {
		list := &kubelbv1alpha1.LoadBalancerList{}
		if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var mine []*kubelbv1alpha1.LoadBalancer
		for i := range list.Items {
			mine = append(mine, &list.Items[i])
		}
		got, err := hostnames.HostnamesHeldElsewhere(context.Background(), c, "kubelb-system", mine)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, lb := range mine {
			if got[lb.Name] {
				out = append(out, lb.Name)
			}
		}
		return out
	}
	if diff := cmp.Diff([]string{"late"}, held("tenant-a")); diff != "" {
		t.Errorf("tenant-a held (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"api", "steal", "tie"}, held("tenant-b")); diff != "" {
		t.Errorf("tenant-b held (-want +got):\n%s", diff)
	}
	one, err := hostnames.HostnameHeldElsewhere(context.Background(), c, "kubelb-system", lb("tenant-b", "steal", "shop.example.org", 6), "shop.example.org")
	if err != nil || !one {
		t.Errorf("HostnameHeldElsewhere = %v, %v", one, err)
	}
}
