package testenv

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/testsupport"
)

// WaitLeaseHolder waits until the lease namespace/name is held and returns the holder.
func (c *Cluster) WaitLeaseHolder(t TB, namespace, name string, timeout time.Duration) string {
	t.Helper()
	var holder string
	testsupport.Eventually(t, timeout, "lease "+namespace+"/"+name+" to be held", func() error {
		l := &coordinationv1.Lease{}
		if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, l); err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return fmt.Errorf("no holder")
		}
		holder = *l.Spec.HolderIdentity
		return nil
	})
	return holder
}

// LeaseHolder returns the current holder of a lease ("" when released).
func (c *Cluster) LeaseHolder(t TB, namespace, name string) string {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, l); err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
