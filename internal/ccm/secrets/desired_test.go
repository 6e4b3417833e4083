package secrets

import (
	"bytes"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	ccmsource "kubelb.dev/kubelb/internal/ccm/source"
)

func TestGatewayServed(t *testing.T) {
	ours := &gwapiv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "ours"}, Spec: gwapiv1.GatewayClassSpec{ControllerName: ccmsource.ControllerName}}
	theirs := &gwapiv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "theirs"}, Spec: gwapiv1.GatewayClassSpec{ControllerName: "example.com/x"}}
	gw := func(name, class string) *gwapiv1.Gateway {
		return &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gwapiv1.GatewaySpec{GatewayClassName: gwapiv1.ObjectName(class)}}
	}
	for _, tc := range []struct {
		name     string
		gw       *gwapiv1.Gateway
		class    *gwapiv1.GatewayClass
		useClass bool
		want     bool
	}{
		{"class of our controller", gw("web", "ours"), ours, true, true},
		{"class of our controller, class filter off", gw("web", "ours"), ours, false, true},
		{"another controller's class", gw("web", "theirs"), theirs, false, false},
		{"class missing", gw("web", "ours"), nil, false, false},
		{"named kubelb, class kubelb, filter on", gw("kubelb", "kubelb"), nil, true, true},
		{"named kubelb, other class, filter on", gw("kubelb", "theirs"), theirs, true, false},
		{"named kubelb, other class, filter off", gw("kubelb", "theirs"), theirs, false, true},
		{"class kubelb but another name", gw("web", "kubelb"), nil, true, false},
	} {
		if got := ccmsource.GatewayServed(tc.gw, tc.class, tc.useClass); got != tc.want {
			t.Errorf("%s: GatewayServed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIngressServed(t *testing.T) {
	ing := func(class *string, annotation string) *networkingv1.Ingress {
		i := &networkingv1.Ingress{Spec: networkingv1.IngressSpec{IngressClassName: class}}
		if annotation != "" {
			i.Annotations = map[string]string{"kubernetes.io/ingress.class": annotation}
		}
		return i
	}
	for _, tc := range []struct {
		name     string
		ing      *networkingv1.Ingress
		useClass bool
		want     bool
	}{
		{"class kubelb", ing(ptr.To("kubelb"), ""), true, true},
		{"other class", ing(ptr.To("nginx"), ""), true, false},
		{"no class, filter on", ing(nil, ""), true, false},
		{"no class, filter off", ing(nil, ""), false, true},
		{"legacy annotation", ing(nil, "kubelb"), true, true},
		{"class field beats the annotation", ing(ptr.To("nginx"), "kubelb"), true, false},
	} {
		if got := ccmsource.IngressServed(tc.ing, tc.useClass); got != tc.want {
			t.Errorf("%s: IngressServed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestGatewaySecretsAndGrants(t *testing.T) {
	gw := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: gwapiv1.GatewaySpec{Listeners: []gwapiv1.Listener{
		{Name: "a", TLS: &gwapiv1.ListenerTLSConfig{CertificateRefs: []gwapiv1.SecretObjectReference{
			{Name: "local"},
			{Name: "remote", Namespace: ptr.To(gwapiv1.Namespace("certs"))},
			{Name: "cm", Kind: ptr.To(gwapiv1.Kind("ConfigMap"))},
			{Name: "crd", Group: ptr.To(gwapiv1.Group("example.com"))},
			{Name: "local", Group: ptr.To(gwapiv1.Group("")), Kind: ptr.To(gwapiv1.Kind("Secret"))},
		}}},
		{Name: "plain"},
	}}}
	got := fmt.Sprint(GatewaySecrets(gw))
	if want := "[shop/local certs/remote]"; got != want {
		t.Errorf("GatewaySecrets = %s, want %s", got, want)
	}
	// The client certificate the Gateway presents to TLS backends is mirrored too.
	gw.Spec.TLS = &gwapiv1.GatewayTLSConfig{Backend: &gwapiv1.GatewayBackendTLS{ClientCertificateRef: &gwapiv1.SecretObjectReference{Name: "client"}}}
	if got, want := fmt.Sprint(GatewaySecrets(gw)), "[shop/local certs/remote shop/client]"; got != want {
		t.Errorf("GatewaySecrets with a backend client certificate = %s, want %s", got, want)
	}
	gw.Spec.TLS = nil
	remote := types.NamespacedName{Namespace: "certs", Name: "remote"}
	grant := func(fromNS string, name *gwapiv1.ObjectName) gwapiv1.ReferenceGrant {
		return gwapiv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "certs"}, Spec: gwapiv1.ReferenceGrantSpec{
			From: []gwapiv1.ReferenceGrantFrom{{Group: gwapiv1.GroupName, Kind: "Gateway", Namespace: gwapiv1.Namespace(fromNS)}},
			To:   []gwapiv1.ReferenceGrantTo{{Kind: "Secret", Name: name}},
		}}
	}
	for _, tc := range []struct {
		name   string
		grants []gwapiv1.ReferenceGrant
		want   bool
	}{
		{"no grant", nil, false},
		{"grant to all Secrets", []gwapiv1.ReferenceGrant{grant("shop", nil)}, true},
		{"grant to this Secret", []gwapiv1.ReferenceGrant{grant("shop", ptr.To(gwapiv1.ObjectName("remote")))}, true},
		{"grant to another Secret", []gwapiv1.ReferenceGrant{grant("shop", ptr.To(gwapiv1.ObjectName("x")))}, false},
		{"grant from another namespace", []gwapiv1.ReferenceGrant{grant("dev", nil)}, false},
	} {
		if got := SecretGranted("shop", remote, tc.grants); got != tc.want {
			t.Errorf("%s: SecretGranted = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !SecretGranted("shop", types.NamespacedName{Namespace: "shop", Name: "local"}, nil) {
		t.Error("a Secret in the Gateway's namespace needs no grant")
	}
}

func TestCheckAndDesired(t *testing.T) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app-tls", UID: "u-1"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")},
	}
	if r, _ := Check(s); r != "" {
		t.Errorf("TLS Secret refused: %s", r)
	}
	ss := DesiredSyncSecret(s, "tenant-probe")
	if ss.Name != "u-1" || ss.Namespace != "tenant-probe" || ss.Type != corev1.SecretTypeTLS || !bytes.Equal(ss.Data["tls.crt"], []byte("c")) {
		t.Errorf("desired %+v", ss)
	}
	if got := fmt.Sprint(ss.Labels); got != "map[kubelb.k8c.io/managed-by:kubelb kubelb.k8c.io/origin-name:app-tls kubelb.k8c.io/origin-ns:shop kubelb.k8c.io/tenant:probe]" {
		t.Errorf("labels %s", got)
	}
	if drifted(ss, DesiredSyncSecret(s, "tenant-probe")) {
		t.Error("equal SyncSecrets drifted")
	}
	s.Data["tls.key"] = []byte("k2")
	if !drifted(ss, DesiredSyncSecret(s, "tenant-probe")) {
		t.Error("changed data did not drift")
	}
	s.Type = corev1.SecretTypeServiceAccountToken
	if r, _ := Check(s); r != ReasonSecretTypeInvalid {
		t.Errorf("service account token: %q", r)
	}
	s.Type = ""
	s.Data = map[string][]byte{"k": make([]byte, MaxDataBytes)}
	if r, _ := Check(s); r != ReasonSecretTooLarge {
		t.Errorf("oversize: %q", r)
	}
	s.Data = map[string][]byte{"k": make([]byte, MaxDataBytes-1)}
	if r, _ := Check(s); r != "" {
		t.Errorf("at the limit: %q", r)
	}
}
