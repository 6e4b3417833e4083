package route

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/loadbalancer"
	"kubelb.dev/kubelb/internal/portalloc"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// A LoadBalancer's hostname is served by the tenant's Ingress Service. When that Service
// cannot get its listener ports, the LoadBalancer says so (Hostname False
// HostnameNotServed, no status.hostname) instead of claiming a hostname nothing serves; once
// the LoadBalancer itself frees ports, the Ingress Service gets them at once and the
// hostname is served.
func TestHostnameNotServed(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	c := hub.Client
	const ns = "tenant-hs"
	objects.Create(t, c, objects.Namespace(managerNS, nil))
	createNamespace(t, c, ns)
	startManager(t, hub, portalloc.Range{Min: 22000, Max: 22002})

	// Without DNS settings the LoadBalancer has no hostname and takes all three ports.
	port := func(n int32) kubelbv1alpha1.LoadBalancerPort {
		return kubelbv1alpha1.LoadBalancerPort{Name: fmt.Sprint("p", n), Protocol: corev1.ProtocolTCP, Port: n}
	}
	lb := &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: kubelbv1alpha1.LoadBalancerSpec{
		Ports: []kubelbv1alpha1.LoadBalancerPort{port(80), port(81), port(82)},
		Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{AddressesReference: &corev1.ObjectReference{Name: kubelbv1alpha1.DefaultAddressesName},
			Ports: []kubelbv1alpha1.EndpointPort{{Name: "p80", Port: 30080}, {Name: "p81", Port: 30081}, {Name: "p82", Port: 30082}}}},
	}}
	objects.Create(t, c, lb)
	waitService(t, c, ns, hubnames.LoadBalancerServiceName("web"), func(s *corev1.Service) error {
		if len(s.Spec.Ports) != 3 {
			return fmt.Errorf("%d ports", len(s.Spec.Ports))
		}
		return nil
	})

	// A wildcard domain gives it a hostname; the Ingress Service that would serve it finds
	// no port.
	objects.Create(t, c, objects.Config(managerNS, kubelbv1alpha1.ConfigSpec{DNS: kubelbv1alpha1.DNSSettings{WildcardDomain: ptr.To("*.apps.example.test"), UseDNSAnnotations: ptr.To(true)}}))
	const host = "web.hs.apps.example.test"
	cond := waitHostnameCondition(t, c, ns, "web", metav1.ConditionFalse, loadbalancer.ReasonHostnameNotServed)
	if want := "The hostname " + host + " is not served: the tenant's Ingress Service kubelb-ingress has no listener port"; len(cond.Message) < len(want) || cond.Message[:len(want)] != want {
		t.Errorf("message %q, want it to start with %q", cond.Message, want)
	}
	if got := getLB(t, c, ns, "web").Status.Hostname; got != nil {
		t.Errorf("status.hostname %+v for a hostname nothing serves", got)
	}

	// The LoadBalancer drops two ports: the Ingress Service takes them (no periodic retry)
	// and the hostname is served, with its DNS record.
	objects.Update(t, c, getLB(t, c, ns, "web"), func(lb *kubelbv1alpha1.LoadBalancer) {
		lb.Spec.Ports = lb.Spec.Ports[:1]
		lb.Spec.Endpoints[0].Ports = lb.Spec.Endpoints[0].Ports[:1]
	})
	waitHostnameCondition(t, c, ns, "web", metav1.ConditionTrue, loadbalancer.ReasonHostnameAssigned)
	waitHostname(t, c, ns, "web", &kubelbv1alpha1.HostnameStatus{Hostname: host, DNSRecordCreated: true})
}

func getLB(t *testing.T, c client.Client, ns, name string) *kubelbv1alpha1.LoadBalancer {
	t.Helper()
	lb := &kubelbv1alpha1.LoadBalancer{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, lb); err != nil {
		t.Fatal(err)
	}
	return lb
}

func waitHostnameCondition(t *testing.T, c client.Client, ns, name string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	testsupport.Eventually(t, waitTimeout, fmt.Sprintf("LoadBalancer %s/%s Hostname=%s %s", ns, name, status, reason), func() error {
		cond := meta.FindStatusCondition(getLB(t, c, ns, name).Status.Conditions, loadbalancer.ConditionHostname)
		if cond == nil || cond.Status != status || cond.Reason != reason {
			return fmt.Errorf("condition %+v", cond)
		}
		got = *cond
		return nil
	})
	return got
}
