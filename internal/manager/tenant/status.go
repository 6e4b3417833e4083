package tenant

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/textcut"
)

// FieldOwner is the server-side apply field manager of the Tenant and TenantState status
// fields this controller owns.
const FieldOwner = "kubelb-tenant"

// ConditionReady is the Tenant condition that says whether the tenant is onboarded.
const ConditionReady = "Ready"

// Reasons of the Tenant Ready condition.
const (
	// ReasonProvisioned: namespace, RBAC, kubeconfig Secret and TenantState are in place.
	ReasonProvisioned = "Provisioned"
	// ReasonProvisioning: the controller is creating objects or retrying a failed request.
	ReasonProvisioning = "Provisioning"
	// ReasonNoHubServerURL: neither --tenant-kubeconfig-server nor kube-public/cluster-info
	// gives the API server URL for the ccm kubeconfig.
	ReasonNoHubServerURL = "NoHubServerURL"
	// ReasonInvalidName: "tenant-<name>" is not a valid namespace name.
	ReasonInvalidName = "InvalidName"
	// ReasonNamespaceConflict: namespace tenant-<name> belongs to another owner.
	ReasonNamespaceConflict = "NamespaceConflict"
	// ReasonNamespaceTerminating: namespace tenant-<name> of a previous Tenant is still being
	// deleted.
	ReasonNamespaceTerminating = "NamespaceTerminating"
	// ReasonServiceAccountRevoked: the ccm's ServiceAccount was deleted (revoking its tokens)
	// and is re-created once the API server no longer accepts them.
	ReasonServiceAccountRevoked = "ServiceAccountRevoked"
	// ReasonTokenRequestFailed: the API server refused a token for the ccm's ServiceAccount.
	ReasonTokenRequestFailed = "TokenRequestFailed"
	// ReasonWaitingForTenantObjects: the Tenant is being deleted and LoadBalancers, Routes or
	// SyncSecrets still exist; the message names them and their finalizers. The LoadBalancer
	// controller removes kubelb.k8c.io/cleanup from LoadBalancers; the Tenant controller
	// removes it from Routes and SyncSecrets (no controller of theirs exists yet); any other
	// finalizer is someone else's to remove.
	ReasonWaitingForTenantObjects = "WaitingForTenantObjects"
	// ReasonWaitingForNamespace: the Tenant is being deleted and its namespace still exists.
	ReasonWaitingForNamespace = "WaitingForNamespace"
	// ReasonForeignFinalizers: the Tenant is being deleted and finalizers kubelb does not
	// remove hold its objects or its namespace; the message names each object and finalizer
	// ("LoadBalancer tenant-a/x holds finalizer example.com/foo"), and a Warning Event goes
	// with the transition.
	ReasonForeignFinalizers = "ForeignFinalizers"
)

// ConditionSettingsIgnored is the Tenant condition, present only while it is True, that
// names the settings of the Config and the Tenant in use that are accepted but not
// implemented yet (settings.NotYet), so they are ignored. Reason ReasonNotYetImplemented.
const ConditionSettingsIgnored = "SettingsIgnored"

// ReasonNotYetImplemented is the reason of ConditionSettingsIgnored.
const ReasonNotYetImplemented = "NotYetImplemented"

// outcome is what one reconcile achieved; it becomes the Tenant's status.
type outcome struct {
	// settingsRead: the Config and the Tenant were read, and notYet are their not-yet
	// settings in use (settings.NotYet); otherwise ConditionSettingsIgnored stays as it is.
	settingsRead bool
	notYet       []string
	phase        string
	reason       string
	message      string
	// warn asks for a Warning Event when the condition moves to this reason.
	warn bool
	// requeueAfter asks for another reconcile (e.g. to refresh the token).
	requeueAfter time.Duration
	// counts, when set, are the tenant's object counts to write (counts.go); otherwise the
	// status keeps the ones it shows.
	counts *objectCounts
	// eff is the tenant's effective settings, when reconcileNormal read them.
	eff *settings.Tenant
	// limits, when set, is what ConditionLimitsNearlyReached says (limits.go); otherwise it
	// stays as it is.
	limits *limitsState
}

func (o outcome) ready() bool { return o.phase == kubelbv1alpha1.TenantPhaseReady }

// desiredTenantStatus computes the Tenant status for an outcome.
func desiredTenantStatus(t *kubelbv1alpha1.Tenant, o outcome, now metav1.Time) kubelbv1alpha1.TenantStatus {
	next := *t.Status.DeepCopy()
	next.ObservedGeneration = t.Generation
	next.Phase = o.phase
	if o.counts != nil {
		next.LoadBalancers, next.Routes = o.counts.loadBalancers, o.counts.routes
	}
	status := metav1.ConditionFalse
	if o.ready() {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&next.Conditions, metav1.Condition{
		Type: ConditionReady, Status: status, Reason: o.reason, Message: o.message,
		ObservedGeneration: t.Generation, LastTransitionTime: now,
	})
	if o.limits != nil {
		meta.SetStatusCondition(&next.Conditions, limitsCondition(t, *o.limits, now))
	}
	if o.settingsRead {
		meta.RemoveStatusCondition(&next.Conditions, ConditionSettingsIgnored)
		if len(o.notYet) > 0 {
			meta.SetStatusCondition(&next.Conditions, settingsIgnored(t, o.notYet, now))
		}
	}
	return next
}

// settingsIgnored is ConditionSettingsIgnored for the not-yet settings in use; its
// lastTransitionTime is kept while it stays True.
func settingsIgnored(t *kubelbv1alpha1.Tenant, fields []string, now metav1.Time) metav1.Condition {
	c := metav1.Condition{Type: ConditionSettingsIgnored, Status: metav1.ConditionTrue, Reason: ReasonNotYetImplemented,
		ObservedGeneration: t.Generation, LastTransitionTime: now,
		Message: textcut.Cut("These settings are accepted but not implemented yet, so they are ignored: "+strings.Join(fields, ", ")+
			". Unset them, or expect no effect from them.", maxConditionMessage, textcut.Dots)}
	if prev := meta.FindStatusCondition(t.Status.Conditions, ConditionSettingsIgnored); prev != nil && prev.Status == c.Status {
		c.LastTransitionTime = prev.LastTransitionTime
	}
	return c
}

// maxConditionMessage bounds a condition message (the API allows 32768 bytes).
const maxConditionMessage = 32768

// ownedTenantStatus is the part of a Tenant status this controller applies: every field but
// the conditions of other types than Ready, SettingsIgnored and LimitsNearlyReached.
func ownedTenantStatus(st kubelbv1alpha1.TenantStatus) *kubelbv1alpha1.TenantStatus {
	owned := st.DeepCopy()
	owned.Conditions = ssa.OwnConditions(st.Conditions, ConditionReady, ConditionSettingsIgnored, ConditionLimitsNearlyReached)
	return owned
}

func statusChanged(a, b kubelbv1alpha1.TenantStatus) bool { return !equality.Semantic.DeepEqual(a, b) }
