package sysdump_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/cli"
	"kubelb.dev/kubelb/internal/cli/sysdump"
	"kubelb.dev/kubelb/internal/testenv"
)

// secretValue is in every Secret and SyncSecret of the hub: no byte of the archive may hold it.
const secretValue = "s3cr3t-value-that-must-never-leave-the-hub"

// TestSysdump dumps a real API server's hub: the archive lists kubelb's objects of every
// kind, the namespaces' objects and the Secrets' metadata, says what it could not read (the
// manager's logs: envtest has no kubelet), and holds no Secret data.
func TestSysdump(t *testing.T) {
	hub := testenv.Start(t, "hub", testenv.Options{})
	ctx := context.Background()
	c := hub.Client
	create := func(objs ...client.Object) {
		t.Helper()
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("%T %s: %v", o, o.GetName(), err)
			}
		}
	}
	lastApplied := map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"stringData":{"token":"` + secretValue + `"}}`}
	create(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubelb"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}},
		&v1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		&v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: "lb-web", Namespace: "tenant-a"},
			Spec: v1alpha1.LoadBalancerSpec{
				Endpoints: []v1alpha1.LoadBalancerEndpoints{{Addresses: []v1alpha1.EndpointAddress{{IP: "10.0.0.1"}},
					Ports: []v1alpha1.EndpointPort{{Port: 30080}}}},
				Ports: []v1alpha1.LoadBalancerPort{{Port: 80}},
			}},
		&v1alpha1.SyncSecret{ObjectMeta: metav1.ObjectMeta{Name: "sync-tls", Namespace: "tenant-a", Annotations: lastApplied},
			Data: map[string][]byte{"tls.key": []byte(secretValue)}, StringData: map[string]string{"token": secretValue}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tenant-token", Namespace: "tenant-a", Annotations: lastApplied},
			Data: map[string][]byte{"token": []byte(secretValue)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "xds-ca", Namespace: "kubelb"}, StringData: map[string]string{"ca.key": secretValue}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "unrelated"}, StringData: map[string]string{"k": "v"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "envoy-lb-web", Namespace: "tenant-a"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kubelb-manager-0", Namespace: "kubelb", Labels: map[string]string{"app.kubernetes.io/name": "kubelb-manager"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "kubelb"}}}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kubelb-manager.kubelb.k8c.io", Namespace: "kubelb"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("kubelb-manager-0_5f3c")}},
	)

	path := filepath.Join(t.TempDir(), "dump.tar.gz")
	var out bytes.Buffer
	root := cli.NewRoot(cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out}, sysdump.Command)
	root.SetArgs([]string{"sysdump", "--kubeconfig", hub.Kubeconfig, "-o", path, "--tail", "100"})
	if err := root.Execute(); err != nil {
		t.Fatalf("sysdump: %v\n%s", err, out.String())
	}
	for _, want := range []string{"✓ kubelb objects: 3", "✓ namespaces: kubelb, tenant-a\n", "✓ manager logs: 1 pods",
		"✗ manager pod kubelb/kubelb-manager-0 is not scheduled, it has no logs", "wrote " + path} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	files := untar(t, raw)
	for _, want := range []struct{ file, holds string }{
		{"version.txt", "hub Kubernetes v1."},
		{"kubelb/loadbalancers.yaml", "name: lb-web"},
		{"kubelb/tenants.yaml", "name: a"},
		{"kubelb/syncsecrets.yaml", "tls.key: REDACTED"},
		{"kubelb/routes.yaml", "items: []"},
		{"namespaces/tenant-a/secrets-metadata.yaml", "name: tenant-token"},
		{"namespaces/kubelb/secrets-metadata.yaml", "name: xds-ca"},
		{"namespaces/tenant-a/services.yaml", "name: envoy-lb-web"},
		{"namespaces/kubelb/pods.yaml", "name: kubelb-manager-0"},
		{"namespaces/tenant-a/deployments.yaml", "items:"},
		{"namespaces/tenant-a/events.yaml", "items:"},
		{"logs/leader.txt", "kubelb-manager-0_5f3c"},
		{"errors.txt", "manager pod kubelb/kubelb-manager-0 is not scheduled"},
	} {
		got, ok := files["dump/"+want.file]
		if !ok {
			t.Errorf("the archive has no %s; it has %v", want.file, keys(files))
			continue
		}
		if !strings.Contains(got, want.holds) {
			t.Errorf("%s lacks %q:\n%s", want.file, want.holds, got)
		}
	}
	for f := range files {
		if strings.Contains(f, "unrelated") {
			t.Errorf("the archive holds %s, of a namespace not kubelb's", f)
		}
	}

	// No byte of the archive, compressed or not, holds a Secret's data.
	var all bytes.Buffer
	all.Write(raw)
	for _, content := range files {
		all.WriteString(content)
	}
	for _, form := range []string{secretValue, base64.StdEncoding.EncodeToString([]byte(secretValue))} {
		if bytes.Contains(all.Bytes(), []byte(form)) {
			t.Errorf("the archive holds a Secret's data (%q)", form)
		}
	}
}

// untar returns the files of a tar.gz by name.
func untar(t *testing.T, raw []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = string(b)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
