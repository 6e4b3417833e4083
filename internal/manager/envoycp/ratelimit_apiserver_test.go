package envoycp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/envoycp"
	"kubelb.dev/kubelb/internal/manager/envoyfleet"
	"kubelb.dev/kubelb/internal/manager/status"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds"
)

// TestRateLimitStoreOnARealAPIServer: the envoyfleet and envoycp controllers together on a real
// API server, with the objects of the golden gw-global-rate-limit. With Config "default"
// naming a store, the fleet controller makes the tenant's rate-limit Service, the API server
// gives it a cluster IP, and that rebuilds the tenant: its snapshot on the xDS server gets
// the rate-limit configuration and its policies are no longer OverPlatformBound. The store
// removed, the Service goes and the policies are OverPlatformBound again.
func TestRateLimitStoreOnARealAPIServer(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	ctx := context.Background()
	in, err := translatetest.LoadInput("../../translate/testdata/gw-global-rate-limit.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tenant := in.Tenant
	cfg := &v1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: v1alpha1.DefaultConfigName},
		Spec: v1alpha1.ConfigSpec{RateLimit: &v1alpha1.RateLimitStore{Image: "envoyproxy/ratelimit:3fb70258", RedisURL: "redis.kubelb.svc:6379"}}}
	createAll(t, c,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant, Labels: managedBy}},
		cfg,
	)
	for _, a := range in.Addresses {
		a := a.DeepCopy()
		a.ResourceVersion = ""
		createAll(t, c, a)
	}
	for i := range in.RouteServices {
		svc := in.RouteServices[i].DeepCopy()
		svc.Labels[v1alpha1.LabelManagedBy] = v1alpha1.LabelManagedByValue
		st := svc.Status
		createAll(t, c, svc)
		svc.Status = st
		if err := c.Status().Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	for i := range in.Routes {
		r := in.Routes[i].DeepCopy()
		r.ResourceVersion, r.Generation, r.CreationTimestamp = "", 0, metav1.Time{}
		createAll(t, c, r)
	}
	store := status.NewStore()
	var srv *xds.Server
	testenv.StartManager(t, hub.Config, func(mgr ctrl.Manager) error {
		if err := envoyfleet.SetupWithManager(mgr, envoyfleet.Options{Namespace: managerNamespace, XDSAddress: "xds.kubelb.test:18001"}); err != nil {
			return err
		}
		srv = xds.NewServer(mgr.GetLogger().WithName("xds"), nil)
		return envoycp.SetupWithManager(mgr, srv, store, nil, managerNamespace, translate.Options{ListenerAddress: "127.0.0.1"})
	})
	overBound := func() (int, error) {
		rep := store.Get(tenant)
		if rep == nil {
			return 0, fmt.Errorf("no report")
		}
		n := 0
		for _, p := range rep.Problems {
			if p.Reason == translate.ReasonOverPlatformBound && strings.Contains(p.Message, "rate-limit store") {
				n++
			}
		}
		return n, nil
	}
	testsupport.Eventually(t, 60*time.Second, "the tenant's rate-limit configuration on the xDS server", func() error {
		if srv.TypeVersion(tenant, resource.RateLimitConfigType) == "" {
			return fmt.Errorf("no rate-limit configuration yet")
		}
		if n, err := overBound(); err != nil || n != 0 {
			return fmt.Errorf("%d policies OverPlatformBound (%v)", n, err)
		}
		return nil
	})
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: envoyfleet.RateLimitName}, svc); err != nil || svc.Spec.ClusterIP == "" {
		t.Fatalf("the rate-limit Service: %v %v", svc.Spec.ClusterIP, err)
	}

	// The store removed: the Service goes, the policies are refused again.
	if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Spec.RateLimit = nil
	if err := c.Update(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 60*time.Second, "the policies OverPlatformBound without a store", func() error {
		if n, err := overBound(); err != nil || n == 0 {
			return fmt.Errorf("%d policies OverPlatformBound (%v)", n, err)
		}
		err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: envoyfleet.RateLimitName}, &corev1.Service{})
		if err == nil {
			return fmt.Errorf("the rate-limit Service is still there")
		}
		return client.IgnoreNotFound(err)
	})
}
