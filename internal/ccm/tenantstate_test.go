package ccm

import (
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

// setDisabled plays the manager: TenantState "default" says whether load balancing is
// disabled (created when missing).
func (e *env) setDisabled(t *testing.T, disabled bool) {
	t.Helper()
	testsupport.Eventually(t, wait, fmt.Sprintf("TenantState disable=%v", disabled), func() error {
		ts := &v1alpha1.TenantState{}
		err := e.Hub.Client.Get(e.ctx, client.ObjectKey{Namespace: tenantNS, Name: "default"}, ts)
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if err != nil {
			ts = &v1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "default"}}
			if err := e.Hub.Client.Create(e.ctx, ts); err != nil {
				return err
			}
		}
		ts.Status.LoadBalancer.Disable = disabled
		return e.Hub.Client.Status().Update(e.ctx, ts)
	})
	if e.hubView == nil {
		return
	}
	// Changes made after this point must not race the ccm's view of the verdict.
	testsupport.Eventually(t, wait, "the ccm to see the TenantState", func() error {
		got, err := loadBalancingDisabled(e.ctx, e.hubView, tenantNS)
		if err != nil {
			return err
		}
		if got != disabled {
			return fmt.Errorf("ccm sees disable=%v", got)
		}
		return nil
	})
}

// waitCount waits until the ccm emitted exactly n Events with reason about svc.
func (e *env) waitCount(t *testing.T, reason string, svc *corev1.Service, n int) {
	t.Helper()
	testsupport.Eventually(t, wait, fmt.Sprintf("%d %s Events on %s", n, reason, svc.Name), func() error {
		if got := e.recorded.count(reason, svc); got != n {
			return fmt.Errorf("%d so far", got)
		}
		return nil
	})
}

// TestTenantStateDisable: while the hub disables load balancing no mirror is created or
// updated, each affected Service gets one Warning Event per change of the verdict, existing
// mirrors are left alone, and lifting it takes effect without any Service change.
func TestTenantStateDisable(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "app")
	e.setDisabled(t, true)
	e.startCCM(t, ccmOpts{})

	before := serviceReconciles("app")
	s1 := lbService("app", "s1")
	objects.Create(t, e.Tenant.Client, s1)
	e.waitCount(t, ReasonLoadBalancingDisabled, s1, 1)
	e.waitEvent(t, s1, corev1.EventTypeWarning, ReasonLoadBalancingDisabled)
	waitReconciles(t, "app", before, 1)
	// More reconciles in the same state: no more Events.
	for i := range 2 {
		before = serviceReconciles("app")
		s1 = e.update(t, s1, func(s *corev1.Service) { s.Labels = map[string]string{"round": fmt.Sprint(i)} })
		waitReconciles(t, "app", before, 1)
	}
	if n := e.recorded.count(ReasonLoadBalancingDisabled, s1); n != 1 {
		t.Errorf("%d LoadBalancingDisabled Events in one disabled period, want 1", n)
	}
	e.noMirror(t, s1)
	if hasFinalizer(e.getService(t, "app", "s1")) {
		t.Error("finalizer added although nothing was mirrored")
	}

	// Allowed again: the mirror appears without any change to the Service.
	e.setDisabled(t, false)
	lb := e.mirrorOf(t, s1, func(lb *v1alpha1.LoadBalancer) error { return wantMirror(e.getService(t, "app", "s1"), lb) })

	// Disabled again: the existing mirror stays as it is; a change that would update it is
	// not applied and warned about once; a new Service is not mirrored and warned about.
	e.setDisabled(t, true)
	s1 = e.update(t, s1, func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "extra", Port: 81, Protocol: corev1.ProtocolTCP})
	})
	e.waitCount(t, ReasonLoadBalancingDisabled, s1, 2)
	s2 := lbService("app", "s2")
	objects.Create(t, e.Tenant.Client, s2)
	e.waitCount(t, ReasonLoadBalancingDisabled, s2, 1)
	before = serviceReconciles("app")
	s1 = e.update(t, s1, func(s *corev1.Service) { s.Labels = map[string]string{"round": "again"} })
	waitReconciles(t, "app", before, 1)
	if n := e.recorded.count(ReasonLoadBalancingDisabled, s1); n != 2 {
		t.Errorf("%d LoadBalancingDisabled Events on s1, want 2 (one per disabled period)", n)
	}
	if cur := e.mirrorOf(t, s1, nil); cur.ResourceVersion != lb.ResourceVersion {
		t.Errorf("existing mirror was changed while disabled (resourceVersion %s → %s)", lb.ResourceVersion, cur.ResourceVersion)
	}
	e.noMirror(t, s2)

	// TenantState removed: allowed (the default); pending work is done.
	if err := e.Hub.Client.Delete(e.ctx, &v1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "default"}}); err != nil {
		t.Fatal(err)
	}
	e.mirrorOf(t, s1, func(lb *v1alpha1.LoadBalancer) error { return wantMirror(e.getService(t, "app", "s1"), lb) })
	e.mirrorOf(t, s2, nil)
}

// TestHubForbidden: with credentials that may read but not write the tenant's namespace on
// the hub (a broken Role), the Service gets a Warning Event a person can act on and the
// connectivity gauge drops; fixing the Role lets the mirror through without a restart.
func TestHubForbidden(t *testing.T) {
	e := newEnv(t)
	e.namespace(t, "app")
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "ccm"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{v1alpha1.GroupVersion.Group},
			Resources: []string{"loadbalancers", "addresses", "tenantstates", "syncsecrets"},
			Verbs:     []string{"get", "list", "watch"},
		}},
	}
	objects.Create(t, e.Hub.Client, role)
	objects.Create(t, e.Hub.Client, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "ccm"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "ccm"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "ccm-a"}},
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", e.Hub.WriteKubeconfig(t, "ccm-a", nil))
	if err != nil {
		t.Fatal(err)
	}
	e.startCCM(t, ccmOpts{hubConfig: cfg})

	svc := lbService("app", "web")
	objects.Create(t, e.Tenant.Client, svc)
	ev := e.waitEvent(t, svc, corev1.EventTypeWarning, ReasonHubForbidden)
	t.Logf("Event: %s", ev.Note)
	testsupport.Eventually(t, wait, "connected gauge 0", func() error {
		if v := testutil.ToFloat64(metrics.CCMClusterConnected); v != 0 {
			return fmt.Errorf("%v", v)
		}
		if testutil.ToFloat64(metrics.CCMOperations.WithLabelValues(opPatch, metrics.ResultError)) == 0 { // the apply
			return errors.New("no failed apply counted")
		}
		return nil
	})
	e.noMirror(t, svc)

	role.Rules[0].Verbs = append(role.Rules[0].Verbs, "create", "update", "patch", "delete")
	if err := e.Hub.Client.Update(e.ctx, role); err != nil {
		t.Fatal(err)
	}
	e.mirrorOf(t, e.getService(t, "app", "web"), nil)
	testsupport.Eventually(t, wait, "connected gauge 1", func() error {
		if v := testutil.ToFloat64(metrics.CCMClusterConnected); v != 1 {
			return fmt.Errorf("%v", v)
		}
		return nil
	})
}
