package tenant

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TestSettingsIgnoredAndLayer7State: a not-yet setting of the Config gives every Tenant the
// SettingsIgnored condition naming it, which goes when the setting goes; a Tenant's
// gatewayAPI.disable reaches the ccm as GatewayAPIAllowed=False on its TenantState.
func TestSettingsIgnoredAndLayer7State(t *testing.T) {
	s := startHub(t, true)
	c := s.hub.Client
	config := &kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.DefaultConfigName, Namespace: managerNS}}
	config.Spec.EnvoyProxy.Topology = kubelbv1alpha1.EnvoyProxyTopologyGlobal
	create(t, c, config)
	tn := tenantObj("p")
	tn.Spec.GatewayAPI.Disable = true
	create(t, c, tn)
	waitReady(t, c, "p")

	ignored := func(want bool) func() error {
		return func() error {
			if err := c.Get(bg, types.NamespacedName{Name: "p"}, tn); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(tn.Status.Conditions, ConditionSettingsIgnored)
			switch {
			case !want && cond != nil:
				return fmt.Errorf("still %+v", cond)
			case want && (cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != ReasonNotYetImplemented ||
				!strings.Contains(cond.Message, "Config spec.envoyProxy.topology")):
				return fmt.Errorf("condition %+v", cond)
			}
			return nil
		}
	}
	testsupport.Eventually(t, 30*time.Second, "SettingsIgnored on the Tenant", ignored(true))

	ts := &kubelbv1alpha1.TenantState{}
	if err := c.Get(bg, types.NamespacedName{Namespace: "tenant-p", Name: hubnames.TenantStateName}, ts); err != nil {
		t.Fatal(err)
	}
	gw := meta.FindStatusCondition(ts.Status.Conditions, kubelbv1alpha1.TenantStateConditionGatewayAPI)
	ing := meta.FindStatusCondition(ts.Status.Conditions, kubelbv1alpha1.TenantStateConditionIngress)
	if gw == nil || gw.Status != metav1.ConditionFalse || gw.Reason != kubelbv1alpha1.TenantStateReasonDisabled ||
		ing == nil || ing.Status != metav1.ConditionTrue {
		t.Errorf("TenantState conditions %+v", ts.Status.Conditions)
	}

	update(t, c, config, func(cfg *kubelbv1alpha1.Config) { cfg.Spec.EnvoyProxy.Topology = "" })
	testsupport.Eventually(t, 30*time.Second, "SettingsIgnored gone", ignored(false))
}

// TestTenantStateCarriesTrafficPolicyBounds: the bounds on the tenant's traffic policies reach
// the ccm in the TenantState, each from the Tenant, else the Config, with where it is set,
// through the API server: the Config's empty features list (no feature allowed) stays an
// empty list, not an absent one (which would allow all). Unset everywhere, they go.
func TestTenantStateCarriesTrafficPolicyBounds(t *testing.T) {
	s := startHub(t, true)
	c := s.hub.Client
	config := &kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.DefaultConfigName, Namespace: managerNS}}
	config.Spec.TrafficPolicies = &kubelbv1alpha1.TrafficPolicyBounds{Features: &[]kubelbv1alpha1.TrafficPolicyFeature{}, MaxRetries: ptr.To[int32](3)}
	create(t, c, config)
	tn := tenantObj("b")
	tn.Spec.TrafficPolicies = &kubelbv1alpha1.TrafficPolicyBounds{MaxRetries: ptr.To[int32](1)}
	create(t, c, tn)
	waitReady(t, c, "b")

	bounds := func(check func(*kubelbv1alpha1.TenantTrafficPolicyBounds) error) func() error {
		return func() error {
			ts := &kubelbv1alpha1.TenantState{}
			if err := c.Get(bg, types.NamespacedName{Namespace: "tenant-b", Name: hubnames.TenantStateName}, ts); err != nil {
				return err
			}
			return check(ts.Status.TrafficPolicies)
		}
	}
	testsupport.Eventually(t, 30*time.Second, "the bounds in the TenantState", bounds(func(b *kubelbv1alpha1.TenantTrafficPolicyBounds) error {
		if b == nil || b.Features == nil || len(*b.Features) != 0 || b.MaxRetries == nil || *b.MaxRetries != 1 ||
			b.SetBy["features"] != "Config default" || b.SetBy["maxRetries"] != "Tenant b" {
			return fmt.Errorf("trafficPolicies %+v", b)
		}
		return nil
	}))
	update(t, c, tn, func(tn *kubelbv1alpha1.Tenant) { tn.Spec.TrafficPolicies = nil })
	update(t, c, config, func(cfg *kubelbv1alpha1.Config) { cfg.Spec.TrafficPolicies = nil })
	testsupport.Eventually(t, 30*time.Second, "no bounds in the TenantState", bounds(func(b *kubelbv1alpha1.TenantTrafficPolicyBounds) error {
		if b != nil {
			return fmt.Errorf("trafficPolicies %+v", b)
		}
		return nil
	}))
}
