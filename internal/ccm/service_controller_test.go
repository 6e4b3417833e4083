package ccm

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// update applies change to the current version of a tenant Service, retrying on conflicts.
func (e *env) update(t *testing.T, svc *corev1.Service, change func(*corev1.Service)) *corev1.Service {
	t.Helper()
	return objects.Edit(t, e.Tenant.Client, wait, svc, change)
}

// wantMirror checks a LoadBalancer against the Service it mirrors.
func wantMirror(svc *corev1.Service, lb *v1alpha1.LoadBalancer) error {
	want, _ := DesiredLoadBalancer(svc, tenantNS)
	if diff := cmp.Diff(want.Spec, lb.Spec); diff != "" {
		return fmt.Errorf("spec (-want +got):\n%s", diff)
	}
	for k, v := range want.Labels {
		if lb.Labels[k] != v {
			return fmt.Errorf("label %s = %q, want %q", k, lb.Labels[k], v)
		}
	}
	return nil
}

// TestServiceMirror follows one LoadBalancer Service through its life: finalizer and mirror
// with the right ports, NodePorts, labels, persistence and traffic policy; status back from the
// hub; updates; a quiet system writes nothing (also across a restart and forced resyncs);
// type change to ClusterIP releases it; deletion removes mirror and Service.
func TestServiceMirror(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "shop")
	stop := e.startCCM(t, ccmOpts{})

	svc := lbService("shop", "web")
	svc.Annotations = map[string]string{v1alpha1.AnnotationProxyProtocol: "v2", "example.com/team": "blue"}
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
	created := time.Now()
	objects.Create(t, e.Tenant.Client, svc)

	var lb *v1alpha1.LoadBalancer
	testsupport.Eventually(t, wait, "finalizer and mirror", func() error {
		cur := e.getService(t, "shop", "web")
		if !hasFinalizer(cur) {
			return errors.New("no finalizer yet")
		}
		lb = &v1alpha1.LoadBalancer{}
		if err := e.Hub.Client.Get(e.ctx, client.ObjectKey{Namespace: tenantNS, Name: string(cur.UID)}, lb); err != nil {
			return err
		}
		svc = cur
		return wantMirror(cur, lb)
	})
	t.Logf("Service → mirror with finalizer: %s", time.Since(created).Round(time.Millisecond))

	// The NodePorts the tenant API server allocated are the endpoint ports.
	ep := lb.Spec.Endpoints[0]
	if ep.AddressesReference == nil || ep.AddressesReference.Name != v1alpha1.DefaultAddressesName || ep.AddressesReference.Kind != "Addresses" {
		t.Errorf("addressesReference = %+v", ep.AddressesReference)
	}
	for i, p := range svc.Spec.Ports {
		if p.NodePort == 0 || ep.Ports[i].Port != p.NodePort || lb.Spec.Ports[i].Port != p.Port || lb.Spec.Ports[i].Protocol != p.Protocol {
			t.Errorf("port %d: service %+v, lb %+v, endpoint %+v", i, p, lb.Spec.Ports[i], ep.Ports[i])
		}
	}
	if lb.Spec.Persistence == nil || lb.Spec.Persistence.Type != v1alpha1.PersistenceSourceIP {
		t.Errorf("persistence = %+v, want SourceIP", lb.Spec.Persistence)
	}
	if lb.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		t.Errorf("externalTrafficPolicy = %q", lb.Spec.ExternalTrafficPolicy)
	}
	if lb.Annotations[v1alpha1.AnnotationProxyProtocol] != "v2" || lb.Annotations["example.com/team"] != "blue" {
		t.Errorf("annotations = %v", lb.Annotations)
	}
	wantLabels := map[string]string{
		v1alpha1.LabelOriginName: "web", v1alpha1.LabelOriginNamespace: "shop", v1alpha1.LabelOriginResourceKind: "Service",
		v1alpha1.LabelTenantName: hubnames.TenantName(tenantNS), v1alpha1.LabelManagedBy: "kubelb",
	}
	if diff := cmp.Diff(wantLabels, lb.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	e.waitEvent(t, svc, corev1.EventTypeNormal, ReasonLoadBalancerCreated)
	testsupport.Eventually(t, wait, "managed services gauge", func() error {
		if v := testutil.ToFloat64(metrics.CCMManagedServices.WithLabelValues("shop")); v != 1 {
			return fmt.Errorf("%v", v)
		}
		if v := testutil.ToFloat64(metrics.CCMClusterConnected); v != 1 {
			return fmt.Errorf("connected = %v", v)
		}
		return nil
	})

	// The test plays the manager: the hub's status reaches the tenant Service.
	statusAt := time.Now()
	e.setLBStatus(t, lb, "127.0.0.42")
	e.waitServiceIngress(t, svc, "127.0.0.42")
	t.Logf("hub status → tenant Service status: %s", time.Since(statusAt).Round(time.Millisecond))
	e.setLBStatus(t, lb, "127.0.0.42", "127.0.0.43")
	e.waitServiceIngress(t, svc, "127.0.0.42", "127.0.0.43")

	// A spec change reaches the mirror: a new port, no more affinity, an annotation removed.
	svc = e.update(t, svc, func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP})
		s.Spec.SessionAffinity = corev1.ServiceAffinityNone
		s.Spec.SessionAffinityConfig = nil
		delete(s.Annotations, "example.com/team")
	})
	lb = e.mirrorOf(t, svc, func(lb *v1alpha1.LoadBalancer) error {
		if err := wantMirror(svc, lb); err != nil {
			return err
		}
		if _, ok := lb.Annotations["example.com/team"]; ok {
			return errors.New("removed annotation still mirrored")
		}
		return nil
	})
	if lb.Spec.Persistence != nil {
		t.Errorf("persistence = %+v, want none", lb.Spec.Persistence)
	}
	// The status the hub wrote survives the spec update.
	e.waitServiceIngress(t, svc, "127.0.0.42", "127.0.0.43")

	// A quiet system writes nothing: not after a restart (everything reconciled again), not on
	// forced resyncs, not on a Service update that changes nothing the hub sees.
	stop()
	svc = e.getService(t, "shop", "web")
	lb = e.mirrorOf(t, svc, nil)
	writes, created0 := hubWrites(), len(e.events(t, svc, ReasonLoadBalancerCreated))
	before := serviceReconciles("shop")
	statusBefore := controllerReconciles(t, "ccm-service-status")
	e.startCCM(t, ccmOpts{syncPeriod: time.Second})
	waitReconciles(t, "shop", before, 3) // start-up plus at least two resyncs
	svc = e.update(t, svc, func(s *corev1.Service) {
		s.Labels = map[string]string{"touched": "yes"}
	})
	before = serviceReconciles("shop")
	waitReconciles(t, "shop", before, 1)
	testsupport.Eventually(t, wait, "status controller resyncs", func() error {
		if n := controllerReconciles(t, "ccm-service-status") - statusBefore; n < 3 {
			return fmt.Errorf("%v reconciles", n)
		}
		return nil
	})
	if w := hubWrites() - writes; w != 0 {
		t.Errorf("quiet system: %v writes to the hub", w)
	}
	lbNow := e.mirrorOf(t, svc, nil)
	if lbNow.ResourceVersion != lb.ResourceVersion {
		t.Errorf("quiet system: LoadBalancer resourceVersion %s → %s", lb.ResourceVersion, lbNow.ResourceVersion)
	}
	if cur := e.getService(t, "shop", "web"); cur.ResourceVersion != svc.ResourceVersion {
		t.Errorf("quiet system: Service resourceVersion %s → %s", svc.ResourceVersion, cur.ResourceVersion)
	}
	if n := len(e.events(t, svc, ReasonLoadBalancerCreated)); n != created0 {
		t.Errorf("LoadBalancerCreated Events: %d, want %d", n, created0)
	}

	// The mirror deleted on the hub behind the ccm's back is re-created.
	if err := e.Hub.Client.Delete(e.ctx, lbNow); err != nil {
		t.Fatal(err)
	}
	e.mirrorOf(t, svc, func(lb *v1alpha1.LoadBalancer) error {
		if lb.UID == lbNow.UID {
			return errors.New("still the old one")
		}
		return wantMirror(svc, lb)
	})
	lb = e.mirrorOf(t, svc, nil)
	e.setLBStatus(t, lb, "127.0.0.44")
	e.waitServiceIngress(t, svc, "127.0.0.44")

	// Type ClusterIP: mirror deleted, status cleared, finalizer removed.
	svc = e.update(t, svc, func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = 0
		}
		s.Spec.ExternalTrafficPolicy = ""
	})
	e.waitMirrorGone(t, svc)
	e.waitReleased(t, svc)
	testsupport.Eventually(t, wait, "managed services gauge back to 0", func() error {
		if v := testutil.ToFloat64(metrics.CCMManagedServices.WithLabelValues("shop")); v != 0 {
			return fmt.Errorf("%v", v)
		}
		return nil
	})

	// Back to LoadBalancer, then deleted: the mirror goes and the Service with it.
	svc = e.update(t, svc, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer })
	e.mirrorOf(t, svc, func(lb *v1alpha1.LoadBalancer) error { return wantMirror(e.getService(t, "shop", "web"), lb) })
	if err := e.Tenant.Client.Delete(e.ctx, svc); err != nil {
		t.Fatal(err)
	}
	e.waitMirrorGone(t, svc)
	objects.WaitGone(t, e.Tenant.Client, wait, svc.DeepCopy())
}

// TestServiceClassFilter: with the class filter on, only class kubelb is mirrored; a Service
// with another class is never touched, whatever the filter; turning the filter on releases
// class-less Services the ccm mirrored before (mirror deleted, status cleared, finalizer
// removed).
func TestServiceClassFilter(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "cls")
	stop := e.startCCM(t, ccmOpts{Options: Options{UseLoadBalancerClass: false}})

	before := serviceReconciles("cls")
	plain := lbService("cls", "plain")
	other := lbService("cls", "other")
	other.Spec.LoadBalancerClass = ptr.To("example.com/other")
	ours := lbService("cls", "ours")
	ours.Spec.LoadBalancerClass = ptr.To(v1alpha1.DefaultClass)
	for _, s := range []*corev1.Service{plain, other, ours} {
		objects.Create(t, e.Tenant.Client, s)
	}
	otherRV := other.ResourceVersion

	// Filter off: class-less and kubelb are mirrored, the other class is not.
	plainLB := e.mirrorOf(t, plain, nil)
	e.mirrorOf(t, ours, nil)
	waitReconciles(t, "cls", before, 3)
	e.noMirror(t, other)
	e.setLBStatus(t, plainLB, "127.0.0.50")
	e.waitServiceIngress(t, plain, "127.0.0.50")
	stop()

	// Filter on: the class-less Service is released, the kubelb one stays, the other class is
	// still untouched.
	before = serviceReconciles("cls")
	e.startCCM(t, ccmOpts{Options: Options{UseLoadBalancerClass: true}})
	e.waitMirrorGone(t, plain)
	e.waitReleased(t, plain)
	waitReconciles(t, "cls", before, 3)
	e.mirrorOf(t, ours, nil)

	// A new class-less Service is ignored with the filter on.
	before = serviceReconciles("cls")
	late := lbService("cls", "late")
	objects.Create(t, e.Tenant.Client, late)
	waitReconciles(t, "cls", before, 1)
	e.noMirror(t, late)
	if hasFinalizer(e.getService(t, "cls", "late")) {
		t.Error("class-less Service got a finalizer with the filter on")
	}

	cur := e.getService(t, "cls", "other")
	if cur.ResourceVersion != otherRV || hasFinalizer(cur) {
		t.Errorf("Service of another class was touched: resourceVersion %s → %s, finalizers %v", otherRV, cur.ResourceVersion, cur.Finalizers)
	}
	e.noMirror(t, other)
	if n := len(e.events(t, cur, ReasonLoadBalancerCreated)); n != 0 {
		t.Errorf("Service of another class got %d Events", n)
	}
}

// TestServiceMirrorHealthCheckNodePort: a Service with externalTrafficPolicy Local carries the
// healthCheckNodePort its API server allocated to the mirror (the hub health-checks every node
// there); switched to Cluster, the field leaves the mirror; back to Local, the new port is
// mirrored again.
func TestServiceMirrorHealthCheckNodePort(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "shop")
	e.startCCM(t, ccmOpts{})

	svc := lbService("shop", "local")
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
	objects.Create(t, e.Tenant.Client, svc)
	svc = e.getService(t, "shop", "local")
	if svc.Spec.HealthCheckNodePort == 0 {
		t.Fatal("the tenant API server allocated no healthCheckNodePort")
	}
	e.mirrorOf(t, svc, func(lb *v1alpha1.LoadBalancer) error {
		if lb.Spec.HealthCheckNodePort != svc.Spec.HealthCheckNodePort {
			return fmt.Errorf("healthCheckNodePort = %d, want %d", lb.Spec.HealthCheckNodePort, svc.Spec.HealthCheckNodePort)
		}
		return nil
	})

	// Cluster: the API server releases the port, and the mirror drops it.
	svc = e.update(t, svc, func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		s.Spec.HealthCheckNodePort = 0
	})
	e.mirrorOf(t, svc, func(lb *v1alpha1.LoadBalancer) error {
		if lb.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster {
			return fmt.Errorf("externalTrafficPolicy = %q", lb.Spec.ExternalTrafficPolicy)
		}
		if lb.Spec.HealthCheckNodePort != 0 {
			return fmt.Errorf("healthCheckNodePort = %d after the switch to Cluster", lb.Spec.HealthCheckNodePort)
		}
		return nil
	})

	// Local again, with a port the tenant chose.
	svc = e.update(t, svc, func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 32555
	})
	e.mirrorOf(t, svc, func(lb *v1alpha1.LoadBalancer) error {
		if lb.Spec.HealthCheckNodePort != 32555 {
			return fmt.Errorf("healthCheckNodePort = %d, want 32555", lb.Spec.HealthCheckNodePort)
		}
		return wantMirror(e.getService(t, "shop", "local"), lb)
	})
}
