package translate_test

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/ir"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
)

// TestHeldGenerationsAndWith: the generations cover the translated objects and the held
// ones, and With adds the held problems and statuses to a Result without modifying it (the
// incremental front end keeps its results). The rest of Hold is in the golden cases
// held-quota and held-disabled.
func TestHeldGenerationsAndWith(t *testing.T) {
	t.Parallel()
	gathered, holds, err := translatetest.LoadCase("testdata/held-quota.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in, held := translate.Hold(gathered, holds)
	ref := func(kind, name string) ir.ObjectRef {
		return ir.ObjectRef{Kind: kind, Namespace: "tenant-a", Name: name}
	}
	want := map[ir.ObjectRef]int64{
		ref(translate.KindLoadBalancer, "old"): 2, ref(translate.KindLoadBalancer, "new"): 4, ref(translate.KindLoadBalancer, "uses-extra"): 1,
		ref(translate.KindRoute, "ing-b"): 2, ref(translate.KindRoute, "gw-c"): 1, ref(translate.KindRoute, "http-d"): 1,
	}
	if got := translate.Generations(&in, held); !maps.Equal(got, want) {
		t.Errorf("Generations = %v, want %v", got, want)
	}

	r, err := translate.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	before := translate.Result{Config: r.Config, Problems: append(ir.Problems(nil), r.Problems...), Routes: maps.Clone(r.Routes)}
	got := held.With(r)
	if !reflect.DeepEqual(r, before) {
		t.Error("With modified the Result")
	}
	if len(got.Problems) != len(r.Problems)+len(held.Problems) || len(got.Routes) != len(r.Routes)+len(held.Routes) {
		t.Errorf("With: %d problems and %d statuses, want %d and %d", len(got.Problems), len(got.Routes),
			len(r.Problems)+len(held.Problems), len(r.Routes)+len(held.Routes))
	}
	if len(held.Routes) != 2 {
		t.Errorf("held statuses of %d Routes, want the Gateway's and the Ingress's", len(held.Routes))
	}
	if nothing := (translate.Held{}).With(r); !reflect.DeepEqual(nothing, r) {
		t.Error("nothing held changes the Result")
	}
}

// TestHoldLeavesOutHostnameCertificates: the certificates of the hostnames of LoadBalancers
// held back or being deleted are left out with them, and the gathered map is not modified.
func TestHoldLeavesOutHostnameCertificates(t *testing.T) {
	t.Parallel()
	gathered, holds, err := translatetest.LoadCase("testdata/held-quota.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gathered.HostnameSecrets = map[string]corev1.Secret{}
	for _, name := range []string{"old", "new", "going"} {
		gathered.HostnameSecrets[name] = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: hubnames.HostnameSecretName(name)}}
	}
	in, _ := translate.Hold(gathered, holds)
	if got := slices.Sorted(maps.Keys(in.HostnameSecrets)); !slices.Equal(got, []string{"old"}) {
		t.Errorf("certificates of %v, want only old's", got)
	}
	if len(gathered.HostnameSecrets) != 3 {
		t.Errorf("Hold modified the gathered certificates: %d left", len(gathered.HostnameSecrets))
	}
}
