package ingresscmd

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/trafficpolicy"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestConvertGolden converts testdata/convert.in.yaml (Ingresses written for ingress-nginx)
// and compares the Gateway API objects with convert.out.yaml and the report of what cannot be
// expressed with convert.notes.txt; the input reversed gives the same output (deterministic).
// Regenerate with: go test ./internal/cli/ingresscmd -update
func TestConvertGolden(t *testing.T) {
	f, err := os.Open("testdata/convert.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ings, err := Read(f, "convert.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(ings) != 5 {
		t.Fatalf("read %d Ingresses, want 5 (the Service is skipped)", len(ings))
	}
	var out, notes bytes.Buffer
	if err := Write(Convert(ings, Options{}), &out, &notes); err != nil {
		t.Fatal(err)
	}
	rev := slices.Clone(ings)
	slices.Reverse(rev)
	var out2, notes2 bytes.Buffer
	if err := Write(Convert(rev, Options{}), &out2, &notes2); err != nil {
		t.Fatal(err)
	}
	if out.String() != out2.String() || notes.String() != notes2.String() {
		t.Error("the output depends on the order of the Ingresses")
	}
	for _, g := range []struct {
		file string
		got  []byte
	}{{"testdata/convert.out.yaml", out.Bytes()}, {"testdata/convert.notes.txt", notes.Bytes()}} {
		if *update {
			if err := os.WriteFile(g.file, g.got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(g.file)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(g.got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", g.file, diff)
		}
	}
	if !strings.Contains(notes.String(), "configuration-snippet") {
		t.Error("the snippet is not reported")
	}
	// The policies written are ones kubelb serves: its own reader accepts them whole.
	res := Convert(ings, Options{})
	if len(res.Policies) != 4 {
		t.Errorf("%d policies, want 4 (a SecurityPolicy for each list, a BackendTrafficPolicy for the connect timeout and limit-rps, one for limit-rpm)", len(res.Policies))
	}
	for _, p := range res.Policies {
		spec := p.Object["spec"].(map[string]any)
		var err error
		switch p.GetKind() {
		case "SecurityPolicy":
			var sec *v1alpha1.Security
			if sec, err = trafficpolicy.ReadSecurity(p.GetNamespace(), p.GetName(), spec); err == nil {
				_, err = trafficpolicy.ResolveSecurity(sec)
			}
		case "BackendTrafficPolicy":
			var bt *v1alpha1.BackendTraffic
			if bt, err = trafficpolicy.Read(p.GetNamespace(), p.GetName(), spec); err == nil {
				_, err = trafficpolicy.Resolve(bt)
			}
		default:
			err = fmt.Errorf("kind %s", p.GetKind())
		}
		if err != nil {
			t.Errorf("%s %s/%s is not served: %v", p.GetKind(), p.GetNamespace(), p.GetName(), err)
		}
		if len(trafficpolicy.Targets(spec)) == 0 {
			t.Errorf("%s %s/%s targets nothing", p.GetKind(), p.GetNamespace(), p.GetName())
		}
	}
}

// TestConvertCanaryByHeaderPattern: a canary with canary-by-header-pattern (and no
// canary-by-header-value) becomes a rule before the main one matching the header's value by
// a RegularExpression that finds the pattern anywhere in it, as nginx does.
func TestConvertCanaryByHeaderPattern(t *testing.T) {
	in := `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: shop}
spec:
  rules:
  - host: app.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web-beta
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/canary: "true"
    nginx.ingress.kubernetes.io/canary-by-header: X-Track
    nginx.ingress.kubernetes.io/canary-by-header-pattern: ^(beta|gamma)$
spec:
  rules:
  - host: app.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web-v2, port: {number: 80}}}}
`
	ings, err := Read(strings.NewReader(in), "in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out, notes bytes.Buffer
	if err := Write(Convert(ings, Options{}), &out, &notes); err != nil {
		t.Fatal(err)
	}
	if o := out.String(); !strings.Contains(o, "name: X-Track") || !strings.Contains(o, "type: RegularExpression") ||
		!strings.Contains(o, "value: (?s).*(?:^(beta|gamma)$).*") {
		t.Errorf("no RegularExpression header match for the pattern in:\n%s", out.String())
	}
	if strings.Contains(notes.String(), "canary-by-header-pattern") {
		t.Errorf("the pattern is noted as not expressed: %s", notes.String())
	}
}

// TestConvertMirrorNotExpressed: a mirror-target kubelb does not read (a Service of another
// namespace, a host outside the cluster) or that would copy bodies the Ingress asks not to copy
// (mirror-request-body off) writes no RequestMirror, and the note says why.
func TestConvertMirrorNotExpressed(t *testing.T) {
	for target, note := range map[string]string{
		"http://copy.other/$request_uri":    "mirror-target: kubelb sends requests only to a Service of the Ingress's namespace shop",
		"https://test.env.com/$request_uri": "mirror-target: kubelb sends requests only to a Service of the Ingress's namespace shop",
		"http://copy/$request_uri":          "mirror-request-body: off: a RequestMirror copies whole requests",
	} {
		ing := networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Annotations: map[string]string{
				"nginx.ingress.kubernetes.io/mirror-target": target, "nginx.ingress.kubernetes.io/mirror-request-body": "off"}},
			Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
		}
		var out, notes bytes.Buffer
		if err := Write(Convert([]networkingv1.Ingress{ing}, Options{}), &out, &notes); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), "RequestMirror") {
			t.Errorf("%s: a RequestMirror was written:\n%s", target, out.String())
		}
		if !strings.Contains(notes.String(), note) {
			t.Errorf("%s: notes %q, want %q", target, notes.String(), note)
		}
	}
}
