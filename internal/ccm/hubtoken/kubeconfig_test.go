package hubtoken

import (
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kubelb.dev/kubelb/internal/manager/tenant"
)

func TestRenderKubeconfigKeepsEverythingButTheToken(t *testing.T) {
	t.Parallel()
	// The kubeconfig exactly as the manager writes it.
	hub := tenant.HubEndpoint{Server: "https://hub.example.com:6443", CAData: []byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")}
	orig, err := tenant.RenderKubeconfig(hub, "tenant-shop", "old-token")
	if err != nil {
		t.Fatal(err)
	}
	out, err := renderKubeconfig(orig, &rest.Config{Host: "https://elsewhere"}, "new-token")
	if err != nil {
		t.Fatal(err)
	}
	if got := KubeconfigToken(out); got != "new-token" {
		t.Errorf("token %q", got)
	}
	want, _ := tenant.RenderKubeconfig(hub, "tenant-shop", "new-token")
	if string(out) != string(want) {
		t.Errorf("rendered\n%s\nwant (as the manager would write it)\n%s", out, want)
	}
	// Rendering the same token again changes nothing, so nothing is written.
	again, _ := renderKubeconfig(out, nil, "new-token")
	if string(again) != string(out) {
		t.Error("re-rendering the same token changed the kubeconfig")
	}
}

func TestRenderKubeconfigFromScratch(t *testing.T) {
	t.Parallel()
	base := &rest.Config{Host: "https://hub:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), ServerName: "hub.internal"}}
	for name, existing := range map[string][]byte{"empty": nil, "garbage": []byte("{not yaml"), "no current context": []byte("apiVersion: v1\nkind: Config\n")} {
		out, err := renderKubeconfig(existing, base, "tok")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cfg, err := clientcmd.Load(out)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cl := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
		if cl == nil || cl.Server != "https://hub:6443" || string(cl.CertificateAuthorityData) != "ca" || cl.TLSServerName != "hub.internal" || KubeconfigToken(out) != "tok" {
			t.Errorf("%s: %+v %q", name, cl, KubeconfigToken(out))
		}
	}
}

func TestRenderKubeconfigReplacesATokenFile(t *testing.T) {
	t.Parallel()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://hub"}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{TokenFile: "/var/run/token"}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u", Namespace: "tenant-a"}
	cfg.CurrentContext = "x"
	raw, _ := clientcmd.Write(*cfg)
	out, err := renderKubeconfig(raw, nil, "tok")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := clientcmd.Load(out)
	if u := got.AuthInfos["u"]; u.Token != "tok" || u.TokenFile != "" || got.Contexts["x"].Namespace != "tenant-a" {
		t.Errorf("user %+v, context %+v", u, got.Contexts["x"])
	}
}

func TestParseSecretRef(t *testing.T) {
	t.Parallel()
	if ref, err := ParseSecretRef("kubelb/kubelb-cluster"); err != nil || ref.Namespace != "kubelb" || ref.Name != "kubelb-cluster" {
		t.Errorf("%+v %v", ref, err)
	}
	for _, bad := range []string{"", "kubelb", "/x", "x/", "a/b/c", "Kubelb/x", "kubelb/X_Y"} {
		if _, err := ParseSecretRef(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
