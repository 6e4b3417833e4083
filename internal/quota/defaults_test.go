package quota

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/settings"
)

// mirroredServices are n tenant Services of type LoadBalancer (HTTP and HTTPS, each with its
// NodePorts, a few annotations as a Helm chart writes them) as the ccm mirrors them into
// tenant namespace ns, one second apart.
func mirroredServices(t *testing.T, ns string, n int) []kubelbv1alpha1.LoadBalancer {
	t.Helper()
	out := make([]kubelbv1alpha1.LoadBalancer, 0, n)
	for i := range n {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "apps", UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
				Annotations: map[string]string{"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": "apps"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
				Ports: []corev1.ServicePort{
					{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: int32(30000 + 2*(i%1000))},
					{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, NodePort: int32(30001 + 2*(i%1000))},
				}},
		}
		lb, problems := ccm.DesiredLoadBalancer(svc, ns)
		if len(problems) > 0 {
			t.Fatalf("mirroring %s: %v", svc.Name, problems)
		}
		lb.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(i) * time.Second))
		out = append(out, *lb)
	}
	return out
}

// TestDefaultInstallAdmitsAThousandServices: a tenant that mirrors 1000 LoadBalancer Services
// (two ports each, so 2000 listener ports and, with the default allocateNodePorts, 2000 hub
// NodePorts) into a hub whose Config and Tenant set no limits gets every one of them served, as
// on KubeLB CE, which has no limits: no default caps a tenant below what the hub can hold
// (issue 31; until then the defaults, 500 listener ports and 256 NodePorts, refused most of
// them). A limit the platform team sets still refuses the newest, with a message to act on.
func TestDefaultInstallAdmitsAThousandServices(t *testing.T) {
	t.Parallel()
	const ns = "tenant-migrated"
	lbs := mirroredServices(t, ns, 1000)
	def := settings.Resolve(nil, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "migrated"}})
	if !def.AllocateNodePorts {
		t.Fatal("a default install allocates hub NodePorts; this test would not count them")
	}
	v := Admission(ns, lbs, nil, def)
	if refused := v.RefusedNames(KindLoadBalancer); len(refused) > 0 {
		msg, _ := v.Refused(KindLoadBalancer, refused[0])
		t.Fatalf("a default install refused %d of 1000 LoadBalancers, the first: %s", len(refused), msg)
	}
	if v.UsedPorts != 2000 {
		t.Errorf("the 1000 LoadBalancers hold %d listener ports, want 2000", v.UsedPorts)
	}
	// The same through the manager's Store (what the Envoy control plane decides with).
	if got := admissionFromStore(t, ns, lbs, def); len(got.RefusedNames(KindLoadBalancer)) > 0 {
		t.Errorf("the Store refused %d LoadBalancers", len(got.RefusedNames(KindLoadBalancer)))
	}

	// A platform team that splits the range sets the limit: the newest are refused.
	split := settings.Resolve(&kubelbv1alpha1.Config{Spec: kubelbv1alpha1.ConfigSpec{Limits: kubelbv1alpha1.Limits{ListenerPorts: ptr.To[int32](500)}}},
		&kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "migrated"}})
	v = Admission(ns, lbs, nil, split)
	refused := v.RefusedNames(KindLoadBalancer)
	if len(refused) != 750 || v.UsedPorts != 500 {
		t.Fatalf("with listenerPorts 500: %d refused, %d ports used; want 750, 500", len(refused), v.UsedPorts)
	}
	if msg, _ := v.Refused(KindLoadBalancer, lbs[999].Name); !strings.Contains(msg, "500 listener ports (spec.limits.listenerPorts)") {
		t.Errorf("the newest LoadBalancer's message: %q", msg)
	}
}

// admissionFromStore is the Store's verdict over lbs (as its informer store holds them).
func admissionFromStore(t *testing.T, ns string, lbs []kubelbv1alpha1.LoadBalancer, ten settings.Tenant) Verdict {
	t.Helper()
	items := make([]any, 0, len(lbs))
	for i := range lbs {
		lb := lbs[i].DeepCopy()
		lb.ResourceVersion = "1"
		items = append(items, lb)
	}
	return newNamespaceMemo().admission(ns, items, nil, ten)
}
