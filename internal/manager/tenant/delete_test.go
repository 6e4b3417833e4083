package tenant

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
)

// waitForTenantObjects waits until the terminating Tenant name waits for its objects (reason
// WaitingForTenantObjects) and check accepts the condition's message.
func waitForTenantObjects(t *testing.T, c client.Client, name string, check func(message string) error) {
	t.Helper()
	waitTerminating(t, c, name, ReasonWaitingForTenantObjects, check)
}

// waitTerminating waits until the terminating Tenant name's Ready condition has reason and
// check accepts its message.
func waitTerminating(t *testing.T, c client.Client, name, reason string, check func(message string) error) {
	t.Helper()
	testsupport.Eventually(t, 30*time.Second, "Tenant "+name+" to be terminating with reason "+reason, func() error {
		tn := tenantObj(name)
		if err := c.Get(bg, client.ObjectKeyFromObject(tn), tn); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(tn.Status.Conditions, ConditionReady)
		if tn.Status.Phase != kubelbv1alpha1.TenantPhaseTerminating || cond == nil || cond.Reason != reason {
			return fmt.Errorf("phase %q condition %+v", tn.Status.Phase, cond)
		}
		return check(cond.Message)
	})
}

// ceObjects reads the Routes or SyncSecrets a KubeLB CE ccm wrote into its hub (testdata,
// copied from the shared fixtures) and moves them into namespace ns, as new objects. The
// redacted key material of the SyncSecrets is replaced by placeholder bytes.
func ceObjects(t *testing.T, file, ns string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		delete(u.Object, "status")
		u.SetNamespace(ns)
		u.SetUID("")
		u.SetResourceVersion("")
		u.SetGeneration(0)
		u.SetCreationTimestamp(metav1.Time{})
		if data, ok := u.Object["data"].(map[string]any); ok {
			for k := range data {
				data[k] = base64.StdEncoding.EncodeToString([]byte("placeholder"))
			}
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no objects", file)
	}
	return out
}

// TestTenantDeletionReleasesRoutesAndSyncSecrets: no controller of the manager handles
// Routes or SyncSecrets yet, so the Tenant controller removes kubelb's own finalizer from
// them when their Tenant is deleted (a KubeLB CE ccm sets it), and waits for, and names, any
// other finalizer.
func TestTenantDeletionReleasesRoutesAndSyncSecrets(t *testing.T) {
	s := startHub(t, true)
	c := s.hub.Client
	create(t, c, tenantObj("ce"))
	waitReady(t, c, "ce")
	ns := "tenant-ce"

	var objs []*unstructured.Unstructured
	objs = append(objs, ceObjects(t, "testdata/hub-routes.yaml", ns)...)
	objs = append(objs, ceObjects(t, "testdata/hub-syncsecrets.yaml", ns)...)
	const foreign = "example.com/keep"
	var held *unstructured.Unstructured
	for i, u := range objs {
		fins := u.GetFinalizers()
		if !slices.Contains(fins, kubelbv1alpha1.CleanupFinalizer) {
			fins = append(fins, kubelbv1alpha1.CleanupFinalizer)
		}
		if i == 0 {
			fins = append(fins, foreign)
			held = u
		}
		u.SetFinalizers(fins)
		if err := c.Create(bg, u); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	kinds := map[string]int{}
	for _, u := range objs {
		kinds[u.GetKind()]++
	}
	if kinds["Route"] == 0 || kinds["SyncSecret"] == 0 {
		t.Fatalf("fixtures hold %v, want Routes and SyncSecrets", kinds)
	}
	heldKey := types.NamespacedName{Namespace: ns, Name: held.GetName()}

	if err := c.Delete(bg, tenantObj("ce")); err != nil {
		t.Fatal(err)
	}

	// Everything but the held Route goes; the Tenant names what holds it.
	waitTerminating(t, c, "ce", ReasonForeignFinalizers, func(message string) error {
		want := fmt.Sprintf("%s %s holds finalizer %s", held.GetKind(), heldKey, foreign)
		if !strings.Contains(message, want) {
			return fmt.Errorf("message %q does not name %q", message, want)
		}
		for _, u := range objs[1:] {
			if err := gone(c, u.DeepCopy()); err != nil {
				return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
			}
		}
		return nil
	})
	got := held.DeepCopy()
	if err := c.Get(bg, heldKey, got); err != nil {
		t.Fatal(err)
	}
	if fins := got.GetFinalizers(); !slices.Equal(fins, []string{foreign}) {
		t.Errorf("finalizers of the held %s: %v, want only %s", held.GetKind(), fins, foreign)
	}
	if tn := tenantObj("ce"); c.Get(bg, client.ObjectKeyFromObject(tn), tn) != nil || tn.DeletionTimestamp.IsZero() {
		t.Fatal("Tenant ce went while a foreign finalizer held one of its objects")
	}

	// The foreign finalizer goes: so do the Route, then the Tenant.
	got.SetFinalizers(nil)
	if err := c.Update(bg, got); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 30*time.Second, "Tenant ce to be gone", func() error { return gone(c, tenantObj("ce")) })
}
