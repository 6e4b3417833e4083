package hubcache_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/hubcache"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestCacheHoldsOnlyKubelbSecrets: a manager with the cache selection the kubelb binary uses
// (CacheByObject) sees, through its cached client, only the Secrets labelled as kubelb's: a
// Secret of another namespace or an unlabelled one in a tenant namespace is not found there
// (the API reader still finds it by name), and a Secret appears once labelled.
func TestCacheHoldsOnlyKubelbSecrets(t *testing.T) {
	t.Parallel()
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done }) // before the API server stops
	managed := map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}
	for _, n := range []string{"tenant-a", "kube-system-ish"} {
		if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	secrets := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "synced", Labels: managed}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "unlabelled"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system-ish", Name: "cloud-credentials"}},
	}
	for _, s := range secrets {
		if err := hub.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	mgr, err := ctrl.NewManager(hub.Config, ctrl.Options{
		Scheme:  testenv.Scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{ByObject: hubcache.CacheByObject()}, // as cmd/kubelb
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	cached := mgr.GetClient()
	seen := func(want ...string) func() error {
		return func() error {
			list := &corev1.SecretList{}
			if err := cached.List(ctx, list); err != nil {
				return err
			}
			var got []string
			for _, s := range list.Items {
				got = append(got, s.Namespace+"/"+s.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				return fmt.Errorf("the manager's cache holds Secrets %v, want %v", got, want)
			}
			return nil
		}
	}
	testsupport.Eventually(t, 30*time.Second, "only kubelb's Secret in the cache", seen("tenant-a/synced"))
	foreign := client.ObjectKey{Namespace: "kube-system-ish", Name: "cloud-credentials"}
	if err := cached.Get(ctx, foreign, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("getting %s through the cached client: %v, want NotFound", foreign, err)
	}
	if err := mgr.GetAPIReader().Get(ctx, foreign, &corev1.Secret{}); err != nil {
		t.Errorf("getting %s through the API reader: %v", foreign, err)
	}

	s := secrets[1].DeepCopy()
	s.Labels = managed
	if err := hub.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 30*time.Second, "a Secret labelled as kubelb's joins the cache", seen("tenant-a/synced", "tenant-a/unlabelled"))
}
