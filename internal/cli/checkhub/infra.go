package checkhub

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/config/crd"
	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/pki/store"
)

// LeaseName is the manager's leader election Lease in its namespace.
const LeaseName = "kubelb-manager.kubelb.k8c.io"

// CAWarnBefore is how long before its expiry the xDS CA fails the check.
const CAWarnBefore = 30 * 24 * time.Hour

func (h *hub) checkLeader(ctx context.Context) Check {
	const name = "leader"
	ns := h.o.ManagerNamespace
	lease := &coordinationv1.Lease{}
	err := h.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: LeaseName}, lease)
	if apierrors.IsNotFound(err) {
		return Check{Name: name, Status: Fail, Detail: "no Lease " + ns + "/" + LeaseName,
			Hint: "no manager replica has led yet: is the manager running (see manager above), with --enable-leader-election (the chart's default)?"}
	}
	if err != nil {
		return readFailed(name, "Lease "+ns+"/"+LeaseName, err)
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	// controller-runtime's identity is "<hostname>_<uuid>"; a pod's hostname is its name.
	pod, _, _ := strings.Cut(holder, "_")
	var expires time.Time
	if lease.Spec.RenewTime != nil && lease.Spec.LeaseDurationSeconds != nil {
		expires = lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	}
	if pod == "" || !expires.After(h.o.Now) {
		detail := "nobody holds the Lease"
		if pod != "" {
			detail = fmt.Sprintf("%s held the Lease until %s and did not renew it", pod, expires.UTC().Format(time.RFC3339))
		}
		return Check{Name: name, Status: Fail, Detail: detail,
			Hint: fmt.Sprintf("no replica leads, so nothing is reconciled: kubectl -n %s get pods; kubectl -n %s logs <a manager pod>", ns, ns)}
	}
	return Check{Name: name, Status: Pass,
		Detail: fmt.Sprintf("%s (its logs: kubectl -n %s logs %s)", pod, ns, pod)}
}

// KnownCRDs are the CRDs this plugin was built with (config/crd/bases).
func KnownCRDs() ([]apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(crd.Bases, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	var out []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := crd.Bases.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var c apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", f, err)
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// checkCRDs: every CRD of the plugin is installed, serves the same versions and has the same
// schema for each.
func checkCRDs(ctx context.Context, c client.Client) Check {
	const name = "CRDs"
	known, err := KnownCRDs()
	if err != nil {
		return Check{Name: name, Status: Fail, Detail: "reading this plugin's CRDs: " + err.Error()}
	}
	var missing, differ []string
	for _, want := range known {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: want.Name}, got); apierrors.IsNotFound(err) {
			missing = append(missing, want.Name)
			continue
		} else if err != nil {
			return readFailed(name, "CustomResourceDefinition "+want.Name, err)
		}
		if d := crdDifference(&want, got); d != "" {
			differ = append(differ, want.Name+" ("+d+")")
		}
	}
	if len(missing)+len(differ) == 0 {
		return Check{Name: name, Status: Pass, Detail: fmt.Sprintf("the %d CRDs of kubelb match this plugin's", len(known))}
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "missing: "+strings.Join(missing, ", "))
	}
	if len(differ) > 0 {
		parts = append(parts, "not this plugin's: "+strings.Join(differ, ", "))
	}
	return Check{Name: name, Status: Fail, Detail: strings.Join(parts, "; "),
		Hint: "install the CRDs of the kubelb release the manager runs (helm upgrade applies the chart's crds/ only on install: kubectl apply --server-side -f charts/kubelb-manager/crds), or use the kubectl-kubelb of that release"}
}

// crdDifference says how got differs from want in served versions and schemas; "" when not.
func crdDifference(want, got *apiextensionsv1.CustomResourceDefinition) string {
	served := map[string]*apiextensionsv1.CustomResourceDefinitionVersion{}
	for i := range got.Spec.Versions {
		if got.Spec.Versions[i].Served {
			served[got.Spec.Versions[i].Name] = &got.Spec.Versions[i]
		}
	}
	for _, v := range want.Spec.Versions {
		g, ok := served[v.Name]
		switch {
		case !ok:
			return v.Name + " not served"
		case v.Schema != nil && (g.Schema == nil || !equality.Semantic.DeepEqual(v.Schema.OpenAPIV3Schema, g.Schema.OpenAPIV3Schema)):
			return "another schema of " + v.Name
		}
	}
	return ""
}

func (h *hub) checkCA(ctx context.Context) Check {
	const name = "xDS CA"
	ns := h.o.ManagerNamespace
	sec := &corev1.Secret{}
	err := h.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pki.CASecretName}, sec)
	if apierrors.IsNotFound(err) {
		return Check{Name: name, Status: Fail, Detail: "no Secret " + ns + "/" + pki.CASecretName,
			Hint: "the manager makes it when it starts: is it running in " + ns + " (see manager above)?"}
	}
	if err != nil {
		return readFailed(name, "Secret "+ns+"/"+pki.CASecretName, err)
	}
	ca, err := store.CAFromSecret(sec)
	if err != nil {
		return Check{Name: name, Status: Fail, Detail: err.Error(),
			Hint: "delete the Secret: the manager makes a new CA and every fleet reconnects (docs/install.md#the-xds-certificates-and-rotating-the-ca)"}
	}
	left := ca.Cert.NotAfter.Sub(h.o.Now)
	detail := fmt.Sprintf("expires %s (in %d days)", ca.Cert.NotAfter.UTC().Format(time.RFC3339), int(left.Hours()/24))
	if left < CAWarnBefore {
		return Check{Name: name, Status: Fail, Detail: detail,
			Hint: "rotate it before it expires: docs/install.md#the-xds-certificates-and-rotating-the-ca"}
	}
	return Check{Name: name, Status: Pass, Detail: detail}
}
