package status

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/process"
	"kubelb.dev/kubelb/internal/reach"
)

// TestReachabilityPassesBounded: a tenant's reachability pass that comes too soon after the
// last (ReachShare) does not run, and says when to run instead; once that time has come it
// runs. A Reconcile that skips the pass is requeued for it, so no change is lost.
func TestReachabilityPassesBounded(t *testing.T) {
	passes := 0
	c := fake.NewClientBuilder().WithScheme(process.Scheme()).Build()
	w := &Writer{client: c, now: time.Now, sink: NewSink(c), endpoints: func(string) reach.Clusters {
		passes++
		return reach.Clusters{}
	}}
	st := &tenantState{}
	report := &Report{Objects: map[ir.ObjectRef]int64{}}
	ctx := context.Background()
	if _, err := w.boundedReachability(ctx, st, "tenant-a", report); err != nil {
		t.Fatal(err)
	}
	if passes != 1 {
		t.Fatalf("first look: %d passes, want 1", passes)
	}
	st.reachAt = time.Now().Add(time.Second) // as after a pass of 10 ms
	wait, err := w.boundedReachability(ctx, st, "tenant-a", report)
	if err != nil {
		t.Fatal(err)
	}
	if passes != 1 || wait <= 0 || wait > time.Second {
		t.Fatalf("a look too soon after the last: %d passes, come back after %v; want 1 pass and at most 1s", passes, wait)
	}
	st.reachAt = time.Now().Add(-time.Millisecond)
	if _, err := w.boundedReachability(ctx, st, "tenant-a", report); err != nil {
		t.Fatal(err)
	}
	if passes != 2 {
		t.Fatalf("a look once the wait is over: %d passes, want 2", passes)
	}
	if !st.reachAt.After(time.Now().Add(-time.Second)) {
		t.Errorf("the pass set no next time: %v", st.reachAt)
	}
	for took, want := range map[time.Duration]time.Duration{
		10 * time.Microsecond: 990 * time.Microsecond, // a small tenant: no wait to speak of
		8 * time.Millisecond:  792 * time.Millisecond, // 10 000 clusters
		time.Second:           MaxReachWait,
	} {
		if got := reachWait(took); got != want {
			t.Errorf("reachWait(%v) = %v, want %v", took, got, want)
		}
	}
}
