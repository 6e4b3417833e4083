package tenant

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
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
	if err := c.Get(bg, types.NamespacedName{Namespace: "tenant-p", Name: TenantStateName}, ts); err != nil {
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
