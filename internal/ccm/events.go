package ccm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/hubschema"
)

// Reasons of the Events the ccm records on tenant Services.
const (
	// ReasonLoadBalancerCreated (Normal): the mirror was created on the hub.
	ReasonLoadBalancerCreated = "LoadBalancerCreated"
	// ReasonHubFeatureUnavailable: the hub's CRDs (KubeLB CE, an older kubelb) do not declare
	// a field the object needs; it is left out and the feature is unavailable on that hub.
	ReasonHubFeatureUnavailable = "HubFeatureUnavailable"
	// ReasonLoadBalancingDisabled (Warning): the hub disabled load balancing for the tenant, so
	// the mirror is not created or updated.
	ReasonLoadBalancingDisabled = "LoadBalancingDisabled"
	// ReasonHubForbidden (Warning): the hub refused the ccm's credentials or request (401/403).
	ReasonHubForbidden = "HubForbidden"
	// ReasonHubLimitExceeded (Warning): the hub refused the mirror because it would take the
	// tenant past one of its limits (the ResourceQuota's counts, the admission webhook's bytes).
	ReasonHubLimitExceeded = "HubLimitExceeded"
	// ReasonHubUnreachable (Warning): the hub's API server could not be reached or failed.
	ReasonHubUnreachable = "HubUnreachable"
	// ReasonLoadBalancerRejected (Warning): the hub rejected the LoadBalancer as invalid.
	ReasonLoadBalancerRejected = "LoadBalancerRejected"
	// ReasonTenantNamespaceMissing (Warning): the tenant's namespace does not exist on the hub.
	ReasonTenantNamespaceMissing = "TenantNamespaceMissing"
	// ReasonPortNotMirrored (Warning): a Service port cannot be load balanced (protocol other
	// than TCP/UDP, or no NodePort because allocateLoadBalancerNodePorts is false).
	ReasonPortNotMirrored = "PortNotMirrored"
	// ReasonInvalidSourceRanges (Warning): spec.loadBalancerSourceRanges (or the annotation
	// service.beta.kubernetes.io/load-balancer-source-ranges) has entries that are not CIDRs
	// (the hub then refuses all of the Service's traffic until they are fixed), or more than
	// 64 (the last ones are left out).
	ReasonInvalidSourceRanges = "InvalidSourceRanges"
	// ReasonProgrammed (Normal): the hub's LoadBalancer is Programmed again after it was not.
	// While it is not, the Warning Event carries the reason of the hub's Programmed condition
	// (e.g. NoEndpoints), or ReasonNotProgrammed when that reason is unusable.
	ReasonProgrammed = "Programmed"
	// ReasonNotProgrammed (Warning): the hub's LoadBalancer is not Programmed and its
	// condition gave no usable reason.
	ReasonNotProgrammed = "NotProgrammed"
)

// Actions of the Events (the events.k8s.io "action" field).
const (
	actionMirror  = "Mirror"
	actionCleanup = "Cleanup"
	actionStatus  = "Status"
)

// maxNote keeps Event notes under the 1 kB the events API accepts.
const maxNote = 1000

// record records an Event on obj with a formatted note, cleaned of control characters and
// cut to the length the API accepts.
func record(rec events.EventRecorder, obj runtime.Object, eventType, reason, action, format string, args ...any) {
	rec.Eventf(obj, nil, eventType, reason, action, "%s", cleanText(fmt.Sprintf(format, args...), maxNote))
}

// recordHubError records a Warning Event on svc for a hub error a person must act on:
// credentials refused, hub unreachable, object rejected. Conflicts, not-found and
// already-exists are routine and get no Event; neither does shutdown.
func recordHubError(ctx context.Context, rec events.EventRecorder, svc *corev1.Service, action, doing string, err error) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return
	}
	switch {
	case hubLimitExceeded(err):
		record(rec, svc, corev1.EventTypeWarning, ReasonHubLimitExceeded, action,
			"The management cluster refused %s: the tenant would pass one of its limits: %v. Delete or shrink other Services, Ingresses, routes or TLS Secrets mirrored to the hub, or ask the hub's operators to raise the Tenant's spec.limits.", doing, err)
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		record(rec, svc, corev1.EventTypeWarning, ReasonHubForbidden, action,
			"The management cluster refused %s: %v. Check the ccm's kubeconfig (Secret kubelb-ccm-kubeconfig) and that the Tenant exists.", doing, err)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		record(rec, svc, corev1.EventTypeWarning, ReasonLoadBalancerRejected, action,
			"The management cluster rejected %s: %v", doing, err)
	case namespaceNotFound(err):
		record(rec, svc, corev1.EventTypeWarning, ReasonTenantNamespaceMissing, action,
			"The management cluster has no namespace for this tenant (%s): %v. Is the Tenant onboarded?", doing, err)
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
	case !isAPIError(err) || apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err):
		record(rec, svc, corev1.EventTypeWarning, ReasonHubUnreachable, action,
			"The management cluster could not be reached for %s: %v. Retrying.", doing, err)
	}
}

// hubLimitExceeded tells whether err is the hub refusing a write for the tenant's limits: the
// ResourceQuota ("exceeded quota") or kubelb's admission webhook (its name in the denial).
func hubLimitExceeded(err error) bool {
	if !apierrors.IsForbidden(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "exceeded quota") || strings.Contains(msg, `"`+hubnames.AdmissionWebhookName+`" denied`)
}

// namespaceNotFound tells whether err says that a namespace does not exist (a create in it).
func namespaceNotFound(err error) bool {
	var s apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &s) {
		return false
	}
	d := s.Status().Details
	return d != nil && d.Kind == "namespaces"
}

// noteHubFeatures records a Warning Event on obj when the hub's CRDs make a feature it asks
// for unavailable (hubschema.Reported.Note), once per change.
func noteHubFeatures(rec events.EventRecorder, notes *hubschema.Reported, obj client.Object, kind string, removed, lost []string) {
	if note, ok := notes.Note(client.ObjectKeyFromObject(obj).String(), kind, removed, lost); ok {
		record(rec, obj, corev1.EventTypeWarning, ReasonHubFeatureUnavailable, actionMirror, "%s", note)
	}
}
