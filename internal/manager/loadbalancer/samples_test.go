package loadbalancer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/manager/planner"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestSampleLoadBalancerIsWhatTheCCMWrites: config/samples shows the LoadBalancer our ccm
// writes for the Service its comment describes (default/web of tenant shop, type
// LoadBalancer, port http 80 with NodePort 30080) — spec.type LoadBalancer included, not the
// CRD's default ClusterIP, which would give the hub Service no address.
func TestSampleLoadBalancerIsWhatTheCCMWrites(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(testsupport.RepoRoot(), "config", "samples", "kubelb_v1alpha1_loadbalancer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sample := &kubelbv1alpha1.LoadBalancer{}
	if err := yaml.UnmarshalStrict(raw, sample); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: types.UID(sample.Name)},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
			IPFamilyPolicy:        ptr.To(corev1.IPFamilyPolicySingleStack), // as the API server fills them
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:                 []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080}},
		},
	}
	want, problems := ccm.DesiredLoadBalancer(svc, sample.Namespace)
	if len(problems) != 0 {
		t.Fatalf("port problems %+v", problems)
	}
	if diff := cmp.Diff(want.Spec, sample.Spec); diff != "" {
		t.Errorf("the sample's spec is not what the ccm writes (-ccm +sample):\n%s", diff)
	}
	if diff := cmp.Diff(want.Labels, sample.Labels); diff != "" {
		t.Errorf("the sample's labels are not what the ccm writes (-ccm +sample):\n%s", diff)
	}
	if diff := cmp.Diff(want.Finalizers, sample.Finalizers); diff != "" {
		t.Errorf("the sample's finalizers are not what the ccm writes (-ccm +sample):\n%s", diff)
	}
	if typ, _ := planner.HubServiceType(sample, true); typ != corev1.ServiceTypeLoadBalancer {
		t.Errorf("the sample's hub Service would be of type %s", typ)
	}
}
