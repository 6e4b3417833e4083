package hubnames

import (
	"crypto/sha256"
	"encoding/hex"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

// CertificateGVK is cert-manager's Certificate, which the manager makes for LoadBalancer
// hostnames when cert-manager's CRDs are served.
var CertificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// AnnotationCertificateName is the annotation cert-manager puts on the Secret it issues,
// naming the Certificate it issued it for.
const AnnotationCertificateName = "cert-manager.io/certificate-name"

// HostnameSecretName is the name of the Secret in the tenant namespace holding the
// certificate of a LoadBalancer's hostname ("lb-<lb name>-tls", made by cert-manager from a
// Certificate for the hostname; "lb-<32 hex of sha256(lb name)>-tls" when that would not be
// a valid Secret name). envoycp passes it in Input.HostnameSecrets.
func HostnameSecretName(lbName string) string {
	name := "lb-" + lbName + "-tls"
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(lbName))
	return "lb-" + hex.EncodeToString(sum[:])[:32] + "-tls"
}

// CertificateLabels are the labels of a LoadBalancer hostname's Certificate, which cert-manager
// also copies to its Secret (spec.secretTemplate): managed-by: kubelb (the manager caches
// only such Secrets) and the LoadBalancer's name.
func CertificateLabels(lbName string) map[string]string {
	return map[string]string{
		kubelbv1alpha1.LabelManagedBy:        kubelbv1alpha1.LabelManagedByValue,
		kubelbv1alpha1.LabelLoadBalancerName: lbName,
	}
}

// OwnsCertificate reports whether the Certificate (metadata suffices) is one the manager
// made for lb: named for it, carrying its labels and controlled by it.
func OwnsCertificate(cert metav1.Object, lb *kubelbv1alpha1.LoadBalancer) bool {
	if cert.GetName() != HostnameSecretName(lb.Name) || cert.GetNamespace() != lb.Namespace {
		return false
	}
	for k, v := range CertificateLabels(lb.Name) {
		if cert.GetLabels()[k] != v {
			return false
		}
	}
	ref := metav1.GetControllerOfNoCopy(cert)
	return ref != nil && ref.UID == lb.UID && ref.Kind == "LoadBalancer"
}

// IsHostnameSecret reports whether a Secret looks like the one cert-manager issued for the
// Certificate of a LoadBalancer hostname: labelled managed-by: kubelb and lb-name (copied by
// cert-manager from the Certificate's secretTemplate), named HostnameSecretName of
// that name, and annotated by cert-manager with the Certificate of the same name. The
// Certificate itself must still be checked (OwnsCertificate): tenants cannot write hub
// Secrets, but only a Certificate the manager made proves the Secret was asked for.
func IsHostnameSecret(o client.Object) bool {
	l := o.GetLabels()
	lbName := l[kubelbv1alpha1.LabelLoadBalancerName]
	if !IsManaged(o) || lbName == "" {
		return false
	}
	name := HostnameSecretName(lbName)
	return o.GetName() == name && o.GetAnnotations()[AnnotationCertificateName] == name
}
