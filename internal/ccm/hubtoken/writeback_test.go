package hubtoken

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"kubelb.dev/kubelb/internal/manager/tenant"
)

// saToken is an unsigned token of tenant-shop/kubelb-ccm with the given UID and exp.
func saToken(uid string, exp int64) string {
	return jwt(fmt.Sprintf(`{"exp":%d,"iat":%d,"jti":"%s-%d","kubernetes.io":{"namespace":"tenant-shop","serviceaccount":{"name":"kubelb-ccm","uid":%q}}}`,
		exp, exp-600, uid, exp, uid))
}

// TestWriteBackOnlyWhenItHelps: a narrow unit test of the Secret write (fake clientset, to
// count writes); the real API servers are in TestRenewalOnRealAPIServers.
func TestWriteBackOnlyWhenItHelps(t *testing.T) {
	t.Parallel()
	hub := tenant.HubEndpoint{Server: "https://hub:6443", CAData: []byte("ca")}
	kubeconfig := func(tok string) []byte {
		b, err := tenant.RenderKubeconfig(hub, "tenant-shop", tok)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	current := saToken("uid-1", 2000)
	for name, tc := range map[string]struct {
		inSecret string
		write    bool
	}{
		"already holds it":                         {current, false},
		"holds a later token of the same account":  {saToken("uid-1", 3000), false},
		"holds an earlier token":                   {saToken("uid-1", 1000), true},
		"holds a later token of a re-created one":  {saToken("uid-2", 3000), true},
		"holds something that is no token of ours": {"opaque", true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cs := fake.NewClientset(&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: "kubelb", Name: "kubelb-cluster"},
				Data:       map[string][]byte{DefaultSecretKey: kubeconfig(tc.inSecret), "other": []byte("kept")},
			})
			c, err := ParseToken(current)
			if err != nil {
				t.Fatal(err)
			}
			r := &Renewer{src: &tokenSource{}, base: &rest.Config{Host: "https://hub:6443"}, secrets: cs.CoreV1(),
				opts: Options{Secret: types.NamespacedName{Namespace: "kubelb", Name: "kubelb-cluster"}}.withDefaults()}
			r.src.install(current, c, t0)
			if err := r.writeBack(context.Background()); err != nil {
				t.Fatal(err)
			}
			updates := 0
			for _, a := range cs.Actions() {
				if a.GetVerb() == "update" {
					updates++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.write]; updates != want {
				t.Fatalf("%d updates, want %d", updates, want)
			}
			sec, _ := cs.CoreV1().Secrets("kubelb").Get(context.Background(), "kubelb-cluster", metav1.GetOptions{})
			if tc.write && string(sec.Data[DefaultSecretKey]) != string(kubeconfig(current)) {
				t.Errorf("written kubeconfig\n%s\nwant\n%s", sec.Data[DefaultSecretKey], kubeconfig(current))
			}
			if string(sec.Data["other"]) != "kept" {
				t.Error("another key of the Secret changed")
			}
		})
	}
}
