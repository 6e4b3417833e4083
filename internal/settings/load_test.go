package settings

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	if err := kubelbv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	config := &kubelbv1alpha1.Config{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kubelb", Name: kubelbv1alpha1.DefaultConfigName},
		Spec:       kubelbv1alpha1.ConfigSpec{LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{Class: ptr.To("metallb")}},
	}
	tenant := &kubelbv1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec:       kubelbv1alpha1.TenantSpec{LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{Disable: true}},
	}
	for _, tc := range []struct {
		name    string
		objects []client.Object
		want    Tenant
	}{
		{"neither", nil, Resolve(nil, nil)},
		{"config only", []client.Object{config}, Resolve(config, nil)},
		{"both", []client.Object{config, tenant}, Resolve(config, tenant)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.objects...).Build()
			got, err := Load(context.Background(), c, "kubelb", "a")
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tc.want.Name || got.DisableLoadBalancer != tc.want.DisableLoadBalancer ||
				ptr.Deref(got.LoadBalancerClass, "") != ptr.Deref(tc.want.LoadBalancerClass, "") ||
				got.Envoy.Replicas != tc.want.Envoy.Replicas {
				t.Fatalf("Load = %+v, want %+v", got, tc.want)
			}
		})
	}

	t.Run("read error", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("boom")
		c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
			Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return boom
			},
		}).Build()
		if _, err := Load(context.Background(), c, "kubelb", "a"); !errors.Is(err, boom) {
			t.Fatalf("Load error = %v, want %v", err, boom)
		}
	})
}
