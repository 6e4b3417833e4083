package hubnames

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
)

func TestHostnameSecretName(t *testing.T) {
	t.Parallel()
	if got := HostnameSecretName("6e0a2f34-1c1e-4b8a-9f0e-2f1d3c4b5a61"); got != "lb-6e0a2f34-1c1e-4b8a-9f0e-2f1d3c4b5a61-tls" {
		t.Errorf("got %q", got)
	}
	long := strings.Repeat("a", 250)
	a, b := HostnameSecretName(long), HostnameSecretName(long+"b")
	if a == b || len(validation.IsDNS1123Subdomain(a)) > 0 || !strings.HasPrefix(a, "lb-") || !strings.HasSuffix(a, "-tls") {
		t.Errorf("long names: %q and %q; want distinct valid Secret names", a, b)
	}
}

func TestIsHostnameSecret(t *testing.T) {
	t.Parallel()
	secret := func(name string, labels, annotations map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
	}
	labels := map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue, kubelbv1alpha1.LabelLoadBalancerName: "web"}
	issued := map[string]string{AnnotationCertificateName: "lb-web-tls"}
	for _, tc := range []struct {
		name string
		s    *corev1.Secret
		want bool
	}{
		{"issued by cert-manager for kubelb's Certificate", secret("lb-web-tls", labels, issued), true},
		{"no cert-manager annotation", secret("lb-web-tls", labels, nil), false},
		{"issued for another Certificate", secret("lb-web-tls", labels, map[string]string{AnnotationCertificateName: "other"}), false},
		{"named for another LoadBalancer", secret("lb-api-tls", labels, map[string]string{AnnotationCertificateName: "lb-api-tls"}), false},
		{"not labelled managed-by", secret("lb-web-tls", map[string]string{kubelbv1alpha1.LabelLoadBalancerName: "web"}, issued), false},
	} {
		if got := IsHostnameSecret(tc.s); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
