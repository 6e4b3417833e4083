package status

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/translate"
)

// BenchmarkWriterLoadBalancerTouched is the status writer's Reconcile of a tenant of n
// LoadBalancers, each with a warning (as in a burst that outgrows the health-check budget),
// after one LoadBalancer's own status changed while the Report stayed the same: in a burst the
// Writer hears thousands of such events per Report. It must look at that one LoadBalancer,
// without a pass over the tenant's objects and problems; the benchmark fails if it looks at
// more.
func BenchmarkWriterLoadBalancerTouched(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchmarkWriterTouched(b, n) })
	}
}

func benchmarkWriterTouched(b *testing.B, n int) {
	const tenant = "tenant-bench"
	ctx := context.Background()
	report := &Report{Objects: map[ir.ObjectRef]int64{}}
	var objs []client.Object
	for i := range n {
		lb := &v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lb-%05d", i), Namespace: tenant, Generation: 1},
			Spec: v1alpha1.LoadBalancerSpec{Ports: []v1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
		meta.SetStatusCondition(&lb.Status.Conditions, metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "AddressAssigned",
			Message: "played", ObservedGeneration: 1})
		objs = append(objs, lb)
		ref := ir.ObjectRef{Kind: translate.KindLoadBalancer, Namespace: tenant, Name: lb.Name}
		report.Objects[ref] = 1
		report.Problems = append(report.Problems, ir.Problem{Object: ref, Severity: ir.SeverityWarning, Reason: "HealthCheckThrottled",
			Message: "the tenant's health checks exceed its budget"})
	}
	c := fake.NewClientBuilder().WithScheme(process.Scheme()).WithObjects(objs...).WithStatusSubresource(&v1alpha1.LoadBalancer{}).Build()
	store := NewStore()
	store.Publish(tenant, report)
	w := &Writer{client: c, store: store, recorder: events.NewFakeRecorder(n + 10), now: time.Now, sink: NewSink(c)}
	req := reconcile.Request{NamespacedName: tenantRequest(tenant).NamespacedName}
	if _, err := w.Reconcile(ctx, req); err != nil { // the first look: every LoadBalancer
		b.Fatal(err)
	}
	before := w.visited
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w.loadBalancerTouched(ctx, objs[0])
		if _, err := w.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if looked := w.visited - before; looked != b.N {
		b.Fatalf("%d touches of one LoadBalancer looked at %d LoadBalancers", b.N, looked)
	}
}
