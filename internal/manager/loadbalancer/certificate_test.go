package loadbalancer

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/translate"
)

func TestDesiredCertificateIsOwned(t *testing.T) {
	t.Parallel()
	lb := &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "web", UID: "u1"}}
	cert := DesiredCertificate(lb, "web.a.example.com", "le")
	if cert.GetName() != "lb-web-tls" || cert.GetNamespace() != "tenant-a" {
		t.Fatalf("Certificate %s/%s", cert.GetNamespace(), cert.GetName())
	}
	if !hubnames.OwnsCertificate(cert, lb) {
		t.Fatal("the desired Certificate is not recognised as the LoadBalancer's")
	}
	other := lb.DeepCopy()
	other.UID = "u2" // a LoadBalancer re-created under the same name
	if hubnames.OwnsCertificate(cert, other) {
		t.Fatal("a Certificate of an older LoadBalancer of the same name counts as the new one's")
	}
	unlabelled := cert.DeepCopy()
	unlabelled.SetLabels(nil)
	if hubnames.OwnsCertificate(unlabelled, lb) {
		t.Fatal("a Certificate without kubelb's labels counts as kubelb's")
	}
	if !certificateUpToDate(cert, DesiredCertificate(lb, "web.a.example.com", "le")) {
		t.Fatal("an unchanged Certificate would be applied again")
	}
	if certificateUpToDate(cert, DesiredCertificate(lb, "web.a.example.com", "staging")) {
		t.Fatal("an issuer change is not seen")
	}
}

func TestHostnameOwnerAndStatus(t *testing.T) {
	t.Parallel()
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lb := func(name, host string, created metav1.Time) kubelbv1alpha1.LoadBalancer {
		return kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created}, Spec: kubelbv1alpha1.LoadBalancerSpec{Hostname: host}}
	}
	dns := translate.DNS{AllowExplicitHostnames: true}
	lbs := []kubelbv1alpha1.LoadBalancer{
		lb("b", "shop.example.com", t0), lb("a", "shop.example.com", t0),
		lb("old", "blog.example.com", t0), lb("new", "blog.example.com", metav1.NewTime(t0.Add(time.Hour))),
	}
	if got := hostnameOwner(lbs, "x", dns, "shop.example.com"); got != "a" {
		t.Errorf("equal ages: owner %q, want a (by name)", got)
	}
	if got := hostnameOwner(lbs, "x", dns, "blog.example.com"); got != "old" {
		t.Errorf("owner %q, want the older", got)
	}
	if hostnameStatus(hostnameState{hostname: "a.example.com", problem: "conflict"}) != nil {
		t.Error("a hostname with a problem is reported in status.hostname")
	}
	if c := hostnameCondition(hostnameState{}, 1); c != nil {
		t.Errorf("a LoadBalancer without hostname has condition %+v", c)
	}
	if c := hostnameCondition(hostnameState{reason: ReasonHostnameInvalid, problem: "bad"}, 1); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("invalid hostname: condition %+v", c)
	}
	if !dnsAnnotated("a.example.com,b.example.com", "b.example.com") || dnsAnnotated("ab.example.com", "b.example.com") {
		t.Error("dnsAnnotated does not split the list")
	}
}
