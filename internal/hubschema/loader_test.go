package hubschema_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubschema"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// dualStackLB is a LoadBalancer as kubelb's ccm writes it for a dual-stack Service.
func dualStackLB() *v1alpha1.LoadBalancer {
	return &v1alpha1.LoadBalancer{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubelb.k8c.io/v1alpha1", Kind: "LoadBalancer"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "uid-1"},
		Spec: v1alpha1.LoadBalancerSpec{
			Endpoints:      []v1alpha1.LoadBalancerEndpoints{{Ports: []v1alpha1.EndpointPort{{Name: "http", Port: 30080, Protocol: corev1.ProtocolTCP}}}},
			Ports:          []v1alpha1.LoadBalancerPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
			IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyRequireDualStack),
			IPFamilies:     []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
		},
	}
}

// TestLoaderFollowsTheHubsCRDs: a tenant's credentials (no rights beyond discovery) read the
// hub's schema; on a hub with kubelb's CRDs nothing is left out; when the hub's LoadBalancer
// CRD is replaced by KubeLB CE's, the running Loader reads it again by itself and leaves out
// kubelb's additions, naming what the user loses.
func TestLoaderFollowsTheHubsCRDs(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	cfg, err := clientcmd.BuildConfigFromFlags("", hub.WriteKubeconfig(t, "tenant-ccm", nil))
	if err != nil {
		t.Fatal(err)
	}
	loader, err := hubschema.NewLoader(cfg, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	loader.Interval = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = loader.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	testsupport.Eventually(t, time.Minute, "the hub's schema read", func() error {
		if !loader.Current().Knows("LoadBalancer") {
			return errNotYet
		}
		return nil
	})
	lb := dualStackLB()
	if removed, lost := loader.Fit("LoadBalancer", lb); removed != nil || lost != nil {
		t.Fatalf("kubelb's own hub: removed %v, lost %v", removed, lost)
	}

	dir, origin := testenv.KubeLBCECRDs(t)
	t.Logf("replacing the hub's LoadBalancer CRD with %s", origin)
	raw, err := os.ReadFile(filepath.Join(dir, "kubelb.k8c.io_loadbalancers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ce := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, ce); err != nil {
		t.Fatal(err)
	}
	cur := &apiextensionsv1.CustomResourceDefinition{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Name: ce.Name}, cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec = ce.Spec
	if err := hub.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	want := []string{"spec.ipFamilies", "spec.ipFamilyPolicy"}
	testsupport.Eventually(t, time.Minute, "the Loader leaving out kubelb's additions", func() error {
		lb := dualStackLB()
		removed, lost := loader.Fit("LoadBalancer", lb)
		if !reflect.DeepEqual(removed, want) || !reflect.DeepEqual(lost, []string{"IPv6 and dual-stack addresses"}) {
			return errNotYet
		}
		if lb.Spec.IPFamilies != nil || lb.Spec.IPFamilyPolicy != nil || len(lb.Spec.Ports) != 1 || lb.Name != "uid-1" {
			t.Fatalf("Fit left %+v", lb)
		}
		return nil
	})
}

type notYet struct{}

func (notYet) Error() string { return "not yet" }

var errNotYet = notYet{}
