package tenant

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/metrics"
	"kubelb.dev/kubelb/internal/quota"
	"kubelb.dev/kubelb/internal/settings"
)

// ConditionLimitsNearlyReached is the Tenant condition that warns the platform team before
// the tenant reaches one of its limits (spec.limits: loadBalancers, routes, listenerPorts,
// nodePorts, objectBytes): True from NearLimitPercent of one, with the numbers, and a Warning
// Event each time it becomes True or its reason changes.
const ConditionLimitsNearlyReached = "LimitsNearlyReached"

// Reasons of ConditionLimitsNearlyReached.
const (
	// ReasonNearLimit: the tenant's objects take NearLimitPercent or more of a limit, and none
	// is refused yet.
	ReasonNearLimit = "NearLimit"
	// ReasonLimitReached: the tenant's objects ask for more than a limit allows: the newest
	// are refused (QuotaExceeded).
	ReasonLimitReached = "LimitReached"
	// ReasonWithinLimits: every limit has room (below NearLimitPercent).
	ReasonWithinLimits = "WithinLimits"
)

// NearLimitPercent is the share of a limit from which the Tenant is warned.
const NearLimitPercent = 80

// limitUse is what the tenant's objects ask for of one limit.
type limitUse struct {
	field       string // spec.limits field
	used, limit int64
}

// near reports whether u is at NearLimitPercent of its limit or more (a limit of 0 refuses
// everything: any use is over it).
func (u limitUse) near() bool { return u.used > 0 && u.used*100 >= u.limit*NearLimitPercent }

// limitUses lists the use of each limit quota.Admit applies, in spec.limits order.
func limitUses(asked quota.Usage, l settings.Limits) []limitUse {
	return []limitUse{
		{"loadBalancers", int64(asked.LoadBalancers), int64(l.LoadBalancers)},
		{"routes", int64(asked.Routes), int64(l.Routes)},
		{"listenerPorts", int64(asked.ListenerPorts), int64(l.ListenerPorts)},
		{"nodePorts", int64(asked.NodePorts), int64(l.NodePorts)},
		{"objectBytes", asked.ObjectBytes, l.ObjectBytes},
	}
}

// limitsState is what the Tenant's ConditionLimitsNearlyReached says.
type limitsState struct {
	uses    []limitUse
	refused int // objects refused by a limit
}

// limits reads what the tenant's objects ask for of its limits eff (from the manager's
// informer stores, through quota.Store), sets the tenant's limit metrics and the outcome's
// limits state.
func (r *Reconciler) limits(ctx context.Context, t *kubelbv1alpha1.Tenant, eff settings.Tenant, o *outcome) error {
	ns := hubnames.TenantNamespace(t.Name)
	v, err := r.quota.LoadAdmission(ctx, ns, eff)
	if err != nil {
		return fmt.Errorf("reading what tenant %s's objects ask for: %w", t.Name, err)
	}
	st := limitsState{uses: limitUses(v.Asked, eff.Limits), refused: v.RefusedCount()}
	for _, u := range st.uses {
		metrics.ManagerTenantLimit.WithLabelValues(ns, u.field).Set(float64(u.limit))
		metrics.ManagerTenantLimitUsage.WithLabelValues(ns, u.field).Set(float64(u.used))
	}
	o.limits = &st
	return nil
}

// limitsCondition is ConditionLimitsNearlyReached for st; its lastTransitionTime is kept
// while its status stays the same.
func limitsCondition(t *kubelbv1alpha1.Tenant, st limitsState, now metav1.Time) metav1.Condition {
	c := metav1.Condition{Type: ConditionLimitsNearlyReached, Status: metav1.ConditionFalse, Reason: ReasonWithinLimits,
		ObservedGeneration: t.Generation, LastTransitionTime: now,
		Message: fmt.Sprintf("The tenant's objects take less than %d%% of each of its limits.", NearLimitPercent)}
	var near []string
	for _, u := range st.uses {
		if u.near() {
			near = append(near, fmt.Sprintf("%s %d of %d (%d%%)", u.field, u.used, u.limit, percent(u.used, u.limit)))
		}
	}
	switch {
	case st.refused > 0:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonLimitReached
		c.Message = fmt.Sprintf("The tenant's objects ask for more than its limits allow: %d refused (QuotaExceeded, the newest first); %s. "+
			"Raise spec.limits on the Tenant (or the Config), or ask the tenant to delete objects.", st.refused, strings.Join(near, ", "))
	case len(near) > 0:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonNearLimit
		c.Message = fmt.Sprintf("The tenant's objects take %d%% or more of a limit: %s. "+
			"Past a limit the newest objects are refused (QuotaExceeded); raise spec.limits on the Tenant (or the Config) before.", NearLimitPercent, strings.Join(near, ", "))
	}
	if prev := meta.FindStatusCondition(t.Status.Conditions, ConditionLimitsNearlyReached); prev != nil && prev.Status == c.Status {
		c.LastTransitionTime = prev.LastTransitionTime
	}
	return c
}

// percent is used as a whole percentage of limit (rounded down); above 100 when over it.
func percent(used, limit int64) int64 {
	if limit <= 0 {
		return 100
	}
	return used * 100 / limit
}

// limitsWarning reports whether the move from prev (nil: none) to next deserves a Warning
// Event: the condition became True, or its reason changed while True.
func limitsWarning(prev *metav1.Condition, next metav1.Condition) bool {
	if next.Status != metav1.ConditionTrue {
		return false
	}
	return prev == nil || prev.Status != metav1.ConditionTrue || prev.Reason != next.Reason
}
