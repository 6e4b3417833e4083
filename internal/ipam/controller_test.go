package ipam

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/lbaddress"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

const wait = 30 * time.Second

// env is one real control plane (kube-apiserver + etcd) with kubelb's CRDs.
type env struct {
	c   *testenv.Cluster
	ctx context.Context
}

func newEnv(t *testing.T, dualStack bool, namespaces ...string) *env {
	t.Helper()
	e := &env{c: testenv.Start(t, "cluster", testenv.Options{DualStack: dualStack}), ctx: t.Context()}
	for _, ns := range namespaces {
		if err := e.c.Client.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// standalone are the options of a standalone ccm that serves the Services without a class.
var standalone = Options{
	Owns: func(s *corev1.Service) bool {
		return s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.LoadBalancerClass == nil
	},
	Pool: PoolFromAnnotation,
}

// start runs the controller in-process until stop or the test's end.
func (e *env) start(t *testing.T, o Options) (stop func()) {
	t.Helper()
	return e.startWith(t, func(mgr ctrl.Manager) error { return Setup(mgr, o) })
}

// startWith runs a manager with the controllers setup adds until stop or the test's end.
func (e *env) startWith(t *testing.T, setup func(ctrl.Manager) error) (stop func()) {
	t.Helper()
	mgr := testenv.NewManager(t, e.c.Config)
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	return testenv.RunManager(t, mgr, "controller", wait)
}

func (e *env) pool(t *testing.T, name string, def bool, addrs ...string) *kubelbv1alpha1.AddressPool {
	t.Helper()
	p := &kubelbv1alpha1.AddressPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kubelbv1alpha1.AddressPoolSpec{Default: def, Addresses: addrs}}
	if err := e.c.Client.Create(e.ctx, p); err != nil {
		t.Fatalf("creating AddressPool %s: %v", name, err)
	}
	return p
}

// lb creates a LoadBalancer Service in ns with TCP ports.
func (e *env) lb(t *testing.T, ns, name string, mutate func(*corev1.Service), ports ...int32) *corev1.Service {
	t.Helper()
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	for _, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", p), Port: p, Protocol: corev1.ProtocolTCP})
	}
	if mutate != nil {
		mutate(s)
	}
	if err := e.c.Client.Create(e.ctx, s); err != nil {
		t.Fatalf("creating Service %s/%s: %v", ns, name, err)
	}
	return s
}

func (e *env) get(t *testing.T, s *corev1.Service) *corev1.Service {
	t.Helper()
	cur := &corev1.Service{}
	if err := e.c.Client.Get(e.ctx, client.ObjectKeyFromObject(s), cur); err != nil {
		t.Fatal(err)
	}
	return cur
}

func (e *env) update(t *testing.T, s *corev1.Service, change func(*corev1.Service)) {
	t.Helper()
	testsupport.Eventually(t, wait, "updating "+s.Name, func() error {
		cur := e.get(t, s)
		change(cur)
		return e.c.Client.Update(e.ctx, cur)
	})
}

func (e *env) delete(t *testing.T, o client.Object) {
	t.Helper()
	if err := e.c.Client.Delete(e.ctx, o); err != nil {
		t.Fatal(err)
	}
}

func ingress(s *corev1.Service) []string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// waitAddrs waits until s shows exactly want, with AddressAssigned True.
func (e *env) waitAddrs(t *testing.T, s *corev1.Service, want ...string) *corev1.Service {
	t.Helper()
	var cur *corev1.Service
	testsupport.Eventually(t, wait, fmt.Sprintf("%s to have %v", s.Name, want), func() error {
		cur = e.get(t, s)
		c := meta.FindStatusCondition(cur.Status.Conditions, lbaddress.ConditionAddressAssigned)
		if got := ingress(cur); !slices.Equal(got, want) || c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("ingress %v, condition %+v", got, c)
		}
		return nil
	})
	return cur
}

// waitPending waits until s has no address and AddressAssigned False with reason, whose
// message contains msg, and a Warning Event with the same reason and message.
func (e *env) waitPending(t *testing.T, s *corev1.Service, reason, msg string) {
	t.Helper()
	testsupport.Eventually(t, wait, fmt.Sprintf("%s pending with %s", s.Name, reason), func() error {
		cur := e.get(t, s)
		c := meta.FindStatusCondition(cur.Status.Conditions, lbaddress.ConditionAddressAssigned)
		if got := ingress(cur); len(got) > 0 || c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || !strings.Contains(c.Message, msg) {
			return fmt.Errorf("ingress %v, condition %+v", got, c)
		}
		list := &eventsv1.EventList{}
		if err := e.c.Client.List(e.ctx, list, client.InNamespace(s.Namespace)); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Regarding.UID == cur.UID && ev.Reason == reason && ev.Type == corev1.EventTypeWarning && ev.Note == c.Message {
				return nil
			}
		}
		return fmt.Errorf("no Warning Event %s with the condition's message %q", reason, c.Message)
	})
}

// waitPool waits until the pool's status passes check.
func (e *env) waitPool(t *testing.T, name string, check func(kubelbv1alpha1.AddressPoolStatus) error) {
	t.Helper()
	testsupport.Eventually(t, wait, "AddressPool "+name+" status", func() error {
		p := &kubelbv1alpha1.AddressPool{}
		if err := e.c.Client.Get(e.ctx, client.ObjectKey{Name: name}, p); err != nil {
			return err
		}
		return check(p.Status)
	})
}

func allocated(f *kubelbv1alpha1.AddressPoolFamilyStatus, size string, n int64) error {
	if f == nil || f.Size != size || f.Allocated != n {
		return fmt.Errorf("family status %+v, want size %s, %d allocated", f, size, n)
	}
	return nil
}

func withAnnotation(k, v string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

func inPool(name string) func(*corev1.Service) {
	return withAnnotation(kubelbv1alpha1.AnnotationAddressPool, name)
}

func both(fs ...func(*corev1.Service)) func(*corev1.Service) {
	return func(s *corev1.Service) {
		for _, f := range fs {
			f(s)
		}
	}
}

// TestStandalonePools runs the standalone controller on a real API server: exhaustion and
// its release, sharing by key, requested addresses, allocateLoadBalancerNodePorts: false,
// pool changes and deletion, the pools' status, and Services that are not (or no longer)
// served.
func TestStandalonePools(t *testing.T) {
	e := newEnv(t, false, "apps")
	e.start(t, standalone)

	t.Run("a pool runs out: the last Service is pending with a condition and an Event, and gets the address a deletion frees", func(t *testing.T) {
		e.pool(t, "small", false, "10.10.0.0/31")
		a := e.lb(t, "apps", "small-a", inPool("small"), 80)
		e.waitAddrs(t, a, "10.10.0.0")
		b := e.lb(t, "apps", "small-b", inPool("small"), 80)
		e.waitAddrs(t, b, "10.10.0.1")
		c := e.lb(t, "apps", "small-c", inPool("small"), 80)
		e.waitPending(t, c, ReasonAddressPoolExhausted, `AddressPool "small" has no free IPv4 address: all 2 are held`)
		e.waitPool(t, "small", func(st kubelbv1alpha1.AddressPoolStatus) error { return allocated(st.IPv4, "2", 2) })
		e.delete(t, a)
		e.waitAddrs(t, c, "10.10.0.0")
	})

	t.Run("sharing by key: other ports share, overlapping ports take another address, a requested shared address with the same port is refused", func(t *testing.T) {
		e.pool(t, "shared", false, "10.20.0.0/30")
		key := withAnnotation(kubelbv1alpha1.AnnotationAllowSharedIP, "web")
		web := e.lb(t, "apps", "share-web", both(inPool("shared"), key), 80, 443)
		e.waitAddrs(t, web, "10.20.0.0")
		dns := e.lb(t, "apps", "share-dns", both(inPool("shared"), key), 53)
		e.waitAddrs(t, dns, "10.20.0.0")
		web2 := e.lb(t, "apps", "share-web2", both(inPool("shared"), key), 443)
		e.waitAddrs(t, web2, "10.20.0.1")
		clash := e.lb(t, "apps", "share-clash", both(inPool("shared"), key, withAnnotation(kubelbv1alpha1.AnnotationLoadBalancerIPs, "10.20.0.0")), 80)
		e.waitPending(t, clash, ReasonPortConflict, `shared under key "web" by Service apps/share-web`)
		e.waitPool(t, "shared", func(st kubelbv1alpha1.AddressPoolStatus) error { return allocated(st.IPv4, "4", 2) })
		// The holder moves to another port: the clash is resolved.
		e.update(t, web, func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "p8443", Port: 8443, Protocol: corev1.ProtocolTCP}}
		})
		e.waitAddrs(t, clash, "10.20.0.0")
	})

	t.Run("a requested address is honoured when free, refused when held or outside the pool", func(t *testing.T) {
		e.pool(t, "def", true, "10.30.0.0/28")
		r1 := e.lb(t, "apps", "req-1", withAnnotation(kubelbv1alpha1.AnnotationLoadBalancerIPs, "10.30.0.5"), 80)
		e.waitAddrs(t, r1, "10.30.0.5")
		r2 := e.lb(t, "apps", "req-2", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.30.0.5" }, 80)
		e.waitPending(t, r2, ReasonAddressInUse, "The requested address 10.30.0.5 is held by Service apps/req-1")
		r3 := e.lb(t, "apps", "req-3", withAnnotation(kubelbv1alpha1.AnnotationLoadBalancerIPs, "10.99.0.1"), 80)
		e.waitPending(t, r3, ReasonAddressNotInPool, `The requested address 10.99.0.1 is not in AddressPool "def"`)
		e.delete(t, r1)
		e.waitAddrs(t, r2, "10.30.0.5")
	})

	t.Run("allocateLoadBalancerNodePorts false: the address needs no NodePort", func(t *testing.T) {
		s := e.lb(t, "apps", "no-nodeports", func(s *corev1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false) }, 80, 443)
		cur := e.waitAddrs(t, s, "10.30.0.0")
		for _, p := range cur.Spec.Ports {
			if p.NodePort != 0 {
				t.Errorf("port %d has NodePort %d", p.Port, p.NodePort)
			}
		}
	})

	t.Run("a changed pool moves its Services; a deleted pool leaves them pending", func(t *testing.T) {
		p := e.pool(t, "moving", false, "10.40.0.0/30")
		m := e.lb(t, "apps", "moving", inPool("moving"), 80)
		e.waitAddrs(t, m, "10.40.0.0")
		testsupport.Eventually(t, wait, "changing the pool", func() error {
			cur := &kubelbv1alpha1.AddressPool{}
			if err := e.c.Client.Get(e.ctx, client.ObjectKeyFromObject(p), cur); err != nil {
				return err
			}
			cur.Spec.Addresses = []string{"10.41.0.8-10.41.0.9", "not-an-address"}
			return e.c.Client.Update(e.ctx, cur)
		})
		e.waitAddrs(t, m, "10.41.0.8")
		e.waitPool(t, "moving", func(st kubelbv1alpha1.AddressPoolStatus) error {
			c := meta.FindStatusCondition(st.Conditions, kubelbv1alpha1.AddressPoolConditionReady)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != kubelbv1alpha1.AddressPoolReasonInvalidAddresses || !strings.Contains(c.Message, "not-an-address") {
				return fmt.Errorf("Ready %+v", c)
			}
			return allocated(st.IPv4, "2", 1)
		})
		e.delete(t, p)
		e.waitPending(t, m, ReasonAddressPoolNotFound, `AddressPool "moving" does not exist`)
	})

	t.Run("two default pools: the older is the default, the newer says so", func(t *testing.T) {
		e.pool(t, "def-2", true, "10.31.0.0/28")
		e.waitPool(t, "def-2", func(st kubelbv1alpha1.AddressPoolStatus) error {
			c := meta.FindStatusCondition(st.Conditions, kubelbv1alpha1.AddressPoolConditionDefault)
			if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, `"def"`) {
				return fmt.Errorf("Default %+v", c)
			}
			return nil
		})
		s := e.lb(t, "apps", "default-pool", nil, 80)
		e.waitAddrs(t, s, "10.30.0.1")
	})

	t.Run("a Service of another class is untouched; one that leaves our class loses what the pools gave it", func(t *testing.T) {
		other := e.lb(t, "apps", "other-class", func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/other") }, 80)
		leaving := e.lb(t, "apps", "leaving", nil, 80)
		e.waitAddrs(t, leaving, "10.30.0.2")
		// Another Service's verdict proves the decision saw the other-class Service.
		if cur := e.get(t, other); len(cur.Status.LoadBalancer.Ingress) > 0 || lbaddress.Serves(cur) {
			t.Fatalf("a Service of another class was written: %+v", cur.Status)
		}
		// loadBalancerClass cannot change on a LoadBalancer: the Service leaves type LoadBalancer.
		e.update(t, leaving, func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeClusterIP
			for i := range s.Spec.Ports {
				s.Spec.Ports[i].NodePort = 0
			}
			s.Spec.AllocateLoadBalancerNodePorts = nil
			s.Spec.ExternalTrafficPolicy = ""
		})
		testsupport.Eventually(t, wait, "the condition to go", func() error {
			cur := e.get(t, leaving)
			if len(cur.Status.LoadBalancer.Ingress) > 0 || lbaddress.Serves(cur) {
				return fmt.Errorf("status %+v", cur.Status)
			}
			return nil
		})
	})
}

// TestRestart: a new controller started after the old one stopped gives every Service the
// same addresses and rewrites none of them (the allocations live in the Services' status).
func TestRestart(t *testing.T) {
	e := newEnv(t, false, "apps")
	stop := e.start(t, standalone)
	e.pool(t, "def", true, "10.70.0.0/29")
	var svcs []*corev1.Service
	for i := range 4 {
		s := e.lb(t, "apps", fmt.Sprintf("s%d", i), nil, 80)
		svcs = append(svcs, s)
		e.waitAddrs(t, s, fmt.Sprintf("10.70.0.%d", i))
	}
	// A gap: the second Service goes, so a fresh allocation would move the later ones down.
	e.delete(t, svcs[1])
	svcs = slices.Delete(svcs, 1, 2)
	versions := map[string]string{}
	for _, s := range svcs {
		versions[s.Name] = e.get(t, s).ResourceVersion
	}
	stop()

	e.start(t, standalone)
	// A new Service gets the freed address: the new controller has decided over all of them.
	fresh := e.lb(t, "apps", "fresh", nil, 80)
	e.waitAddrs(t, fresh, "10.70.0.1")
	for i, s := range svcs {
		want := []string{"10.70.0.0", "10.70.0.2", "10.70.0.3"}[i]
		cur := e.waitAddrs(t, s, want)
		if cur.ResourceVersion != versions[s.Name] {
			t.Errorf("%s was rewritten after the restart (resourceVersion %s → %s)", s.Name, versions[s.Name], cur.ResourceVersion)
		}
	}
}

// TestDualStackFamilies runs on a dual-stack API server: RequireDualStack and
// PreferDualStack against an IPv4-only pool and a dual pool, and an IPv6 single-stack Service.
func TestDualStackFamilies(t *testing.T) {
	e := newEnv(t, true, "apps")
	e.start(t, standalone)
	e.pool(t, "v4", true, "10.80.0.0/30")
	e.pool(t, "dual", false, "10.81.0.0/30", "fd00:81::/126")
	policy := func(p corev1.IPFamilyPolicy) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.IPFamilyPolicy = &p }
	}
	requireV4 := e.lb(t, "apps", "require-v4pool", policy(corev1.IPFamilyPolicyRequireDualStack), 80)
	e.waitPending(t, requireV4, ReasonIPFamilyNotInPool, `needs an IPv6 address (ipFamilyPolicy RequireDualStack, ipFamilies [IPv4 IPv6]) and AddressPool "v4" has none`)
	preferV4 := e.lb(t, "apps", "prefer-v4pool", policy(corev1.IPFamilyPolicyPreferDualStack), 80)
	e.waitAddrs(t, preferV4, "10.80.0.0")
	requireDual := e.lb(t, "apps", "require-dual", both(inPool("dual"), policy(corev1.IPFamilyPolicyRequireDualStack)), 80)
	e.waitAddrs(t, requireDual, "10.81.0.0", "fd00:81::")
	preferDual := e.lb(t, "apps", "prefer-dual", both(inPool("dual"), policy(corev1.IPFamilyPolicyPreferDualStack),
		func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
		}), 80)
	e.waitAddrs(t, preferDual, "10.81.0.1", "fd00:81::1")
	v6 := e.lb(t, "apps", "single-v6", both(inPool("dual"), func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }), 80)
	e.waitAddrs(t, v6, "fd00:81::2")
	e.waitPool(t, "dual", func(st kubelbv1alpha1.AddressPoolStatus) error {
		if err := allocated(st.IPv4, "4", 2); err != nil {
			return err
		}
		return allocated(st.IPv6, "4", 3)
	})
}

// TestHubPools runs the manager's options: a kubelb hub Service takes from its tenant's
// pool (the Tenant's spec.loadBalancer.addressPool, followed when it changes) or the
// default pool; its annotations request nothing; a Service kubelb did not make is untouched.
func TestHubPools(t *testing.T) {
	e := newEnv(t, false, "kubelb", "tenant-a", "tenant-b")
	e.start(t, HubOptions(settings.Reader{Client: e.c.Client, ManagerNamespace: "kubelb"}.AddressPool, ""))
	e.pool(t, "shared", true, "10.90.0.0/30")
	e.pool(t, "gold", false, "10.91.0.0/30")
	tenant := &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec: kubelbv1alpha1.TenantSpec{LoadBalancer: kubelbv1alpha1.LoadBalancerSettings{AddressPool: ptr.To("gold")}}}
	if err := e.c.Client.Create(e.ctx, tenant); err != nil {
		t.Fatal(err)
	}
	kubelbMade := func(s *corev1.Service) {
		s.Labels = map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}
	}
	a := e.lb(t, "tenant-a", "hub-a", both(kubelbMade,
		withAnnotation(kubelbv1alpha1.AnnotationLoadBalancerIPs, "10.91.0.3"), withAnnotation(kubelbv1alpha1.AnnotationAddressPool, "shared")), 80)
	e.waitAddrs(t, a, "10.91.0.0")
	b := e.lb(t, "tenant-b", "hub-b", kubelbMade, 80)
	e.waitAddrs(t, b, "10.90.0.0")
	foreign := e.lb(t, "tenant-a", "not-kubelbs", nil, 80)
	// The tenant's pool changes: its Service moves; the foreign one is still untouched.
	testsupport.Eventually(t, wait, "changing the Tenant", func() error {
		cur := &kubelbv1alpha1.Tenant{}
		if err := e.c.Client.Get(e.ctx, client.ObjectKeyFromObject(tenant), cur); err != nil {
			return err
		}
		cur.Spec.LoadBalancer.AddressPool = nil
		return e.c.Client.Update(e.ctx, cur)
	})
	e.waitAddrs(t, a, "10.90.0.1")
	if cur := e.get(t, foreign); len(cur.Status.LoadBalancer.Ingress) > 0 || lbaddress.Serves(cur) {
		t.Fatalf("a Service kubelb did not make was written: %+v", cur.Status)
	}
}
