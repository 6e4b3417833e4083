package admission

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
)

// WebhookName is the name of the one webhook of ConfigurationName.
const WebhookName = hubnames.AdmissionWebhookName

// TimeoutSeconds is how long the API server waits for the webhook.
const TimeoutSeconds = 10

// Configuration is the ValidatingWebhookConfiguration that sends tenant writes of
// LoadBalancers, Routes and SyncSecrets (not their status) to the webhook at cc: creates
// and updates in the namespaces labelled kubelb.k8c.io/managed-by=kubelb; the API server
// refuses the write when the webhook cannot answer (failurePolicy Fail). The
// kubelb-manager chart renders the same (templates/webhook.yaml; e2e/helm checks they agree).
func Configuration(cc admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.ValidatingWebhookConfiguration {
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	timeout := int32(TimeoutSeconds)
	namespaced := admissionregistrationv1.NamespacedScope
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigurationName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         WebhookName,
			ClientConfig: cc,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{kubelbv1alpha1.GroupVersion.Group},
					APIVersions: []string{"*"},
					Resources:   []string{"loadbalancers", "routes", "syncsecrets"},
					Scope:       &namespaced,
				},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue,
			}},
			ObjectSelector:          &metav1.LabelSelector{},
			FailurePolicy:           &fail,
			MatchPolicy:             &equivalent,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}
