package syncsecret

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/testsupport/objects"
)

const wait = 30 * time.Second

// hub is one API server running the SyncSecret controller.
type hub struct {
	*testenv.Cluster
	t *testing.T
}

func startHub(t *testing.T) *hub {
	t.Helper()
	c := testenv.Start(t, "hub", testenv.Options{})
	log := testr.NewWithOptions(t, testr.Options{LogTimestamp: true})
	testenv.StartManager(t, c.Config, func(mgr ctrl.Manager) error {
		return SetupWithManager(mgr, Options{})
	}, func(o *ctrl.Options) { o.Logger = log })
	return &hub{Cluster: c, t: t}
}

func (h *hub) create(obj client.Object) {
	h.t.Helper()
	objects.Create(h.t, h.Client, obj)
}

// namespace makes a namespace, labelled as a tenant namespace when managed.
func (h *hub) namespace(name string, managed bool) {
	h.t.Helper()
	if managed {
		h.create(objects.ManagedNamespace(name))
		return
	}
	h.create(objects.Namespace(name, nil))
}

// syncSecret is a SyncSecret as the ccm writes it, mirroring tenant Secret originNS/originName.
func syncSecret(ns, name, originNS, originName string, typ corev1.SecretType, data map[string][]byte) *kubelbv1alpha1.SyncSecret {
	return &kubelbv1alpha1.SyncSecret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			kubelbv1alpha1.LabelOriginName: originName, kubelbv1alpha1.LabelOriginNamespace: originNS,
			kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue, kubelbv1alpha1.LabelTenantName: "probe",
		}},
		Type: typ,
		Data: data,
	}
}

// update changes a SyncSecret (retrying on conflicts with the controller's status writes).
func (h *hub) update(ss *kubelbv1alpha1.SyncSecret, change func(*kubelbv1alpha1.SyncSecret)) *kubelbv1alpha1.SyncSecret {
	h.t.Helper()
	cur := &kubelbv1alpha1.SyncSecret{}
	testsupport.Eventually(h.t, wait, "updating SyncSecret "+ss.Name, func() error {
		if err := h.Client.Get(h.t.Context(), client.ObjectKeyFromObject(ss), cur); err != nil {
			return err
		}
		change(cur)
		return h.Client.Update(h.t.Context(), cur)
	})
	return cur
}

// get reads a SyncSecret.
func (h *hub) get(ss *kubelbv1alpha1.SyncSecret) *kubelbv1alpha1.SyncSecret {
	h.t.Helper()
	cur := &kubelbv1alpha1.SyncSecret{}
	if err := h.Client.Get(h.t.Context(), client.ObjectKeyFromObject(ss), cur); err != nil {
		h.t.Fatal(err)
	}
	return cur
}

// secretOf waits for the hub Secret of a SyncSecret and returns it once check accepts it.
func (h *hub) secretOf(ss *kubelbv1alpha1.SyncSecret, check func(*corev1.Secret) error) *corev1.Secret {
	h.t.Helper()
	return objects.WaitFor(h.t, h.Client, wait, client.ObjectKey{Namespace: ss.Namespace, Name: string(ss.UID)}, &corev1.Secret{}, check)
}

// waitSynced waits until the SyncSecret's Synced condition has status and reason.
func (h *hub) waitSynced(ss *kubelbv1alpha1.SyncSecret, status metav1.ConditionStatus, reason string) *kubelbv1alpha1.SyncSecret {
	h.t.Helper()
	cur := &kubelbv1alpha1.SyncSecret{}
	testsupport.Eventually(h.t, wait, fmt.Sprintf("SyncSecret %s Synced=%s (%s)", ss.Name, status, reason), func() error {
		if err := h.Client.Get(h.t.Context(), client.ObjectKeyFromObject(ss), cur); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, ConditionSynced)
		if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != cur.Generation || cur.Status.ObservedGeneration != cur.Generation {
			return fmt.Errorf("status %+v", cur.Status)
		}
		return nil
	})
	return cur
}

// checkOwned fails unless s is controlled by ss and carries the labels the front end finds it by.
func checkOwned(t *testing.T, s *corev1.Secret, ss *kubelbv1alpha1.SyncSecret) {
	t.Helper()
	refs := s.OwnerReferences
	if len(refs) != 1 || refs[0].UID != ss.UID || refs[0].Kind != "SyncSecret" || refs[0].APIVersion != kubelbv1alpha1.GroupVersion.String() ||
		refs[0].Controller == nil || !*refs[0].Controller || refs[0].BlockOwnerDeletion == nil || !*refs[0].BlockOwnerDeletion {
		t.Errorf("ownerReferences %+v, want one controller reference to SyncSecret %s", refs, ss.UID)
	}
	want := map[string]string{
		kubelbv1alpha1.LabelOriginName:      ss.Labels[kubelbv1alpha1.LabelOriginName],
		kubelbv1alpha1.LabelOriginNamespace: ss.Labels[kubelbv1alpha1.LabelOriginNamespace],
		kubelbv1alpha1.LabelManagedBy:       kubelbv1alpha1.LabelManagedByValue,
		LabelSyncSecret:                     ss.Name,
	}
	if fmt.Sprint(s.Labels) != fmt.Sprint(want) {
		t.Errorf("labels %v, want %v", s.Labels, want)
	}
}

// A SyncSecret becomes a Secret named by its UID, owned by it, with its data merged with
// stringData; updates follow, a type change recreates the Secret; the status says Synced.
func TestSyncSecretBecomesSecret(t *testing.T) {
	h := startHub(t)
	h.namespace("tenant-probe", true)
	ss := syncSecret("tenant-probe", "u-1", "apps", "token", "", map[string][]byte{"a": []byte("1"), "b": []byte("2")})
	ss.StringData = map[string]string{"b": "two", "c": "3"}
	h.create(ss)

	s := h.secretOf(ss, nil)
	checkOwned(t, s, ss)
	if fmt.Sprint(s.Data) != fmt.Sprint(map[string][]byte{"a": []byte("1"), "b": []byte("two"), "c": []byte("3")}) {
		t.Errorf("data %q: want a=1, b=two (stringData wins), c=3", s.Data)
	}
	if s.Type != corev1.SecretTypeOpaque {
		t.Errorf("type %q, want Opaque", s.Type)
	}
	cur := h.waitSynced(ss, metav1.ConditionTrue, ReasonSynced)
	c := meta.FindStatusCondition(cur.Status.Conditions, ConditionSynced)
	if c.Message != MessageSynced || cur.Status.Phase != PhaseSynced {
		t.Errorf("status %+v: want phase Synced and message %q (KubeLB CE's)", cur.Status, MessageSynced)
	}

	// New data reaches the Secret.
	h.update(ss, func(cur *kubelbv1alpha1.SyncSecret) {
		cur.Data = map[string][]byte{"a": []byte("one")}
		cur.StringData = nil
	})
	h.secretOf(ss, func(s *corev1.Secret) error {
		if fmt.Sprint(s.Data) != fmt.Sprint(map[string][]byte{"a": []byte("one")}) {
			return fmt.Errorf("data %q", s.Data)
		}
		return nil
	})

	// A type change (immutable on Secrets) recreates it.
	crt, key := testsupport.SelfSignedPEM(t, "shop.example.com")
	h.update(ss, func(cur *kubelbv1alpha1.SyncSecret) {
		cur.Type = corev1.SecretTypeTLS
		cur.Data = map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}
	})
	s2 := h.secretOf(ss, func(s *corev1.Secret) error {
		if s.Type != corev1.SecretTypeTLS || !bytes.Equal(s.Data[corev1.TLSCertKey], crt) {
			return fmt.Errorf("type %q", s.Type)
		}
		return nil
	})
	if s2.UID == s.UID {
		t.Error("the Secret was not recreated for the type change")
	}
	checkOwned(t, s2, ss)
	cur = h.waitSynced(ss, metav1.ConditionTrue, ReasonSynced)

	// Settled: reconciling again writes nothing.
	rv := s2.ResourceVersion
	cur = h.update(ss, func(cur *kubelbv1alpha1.SyncSecret) { cur.Labels["touch"] = "1" })
	testenv.WaitControllerIdle(t, controllerName, 1)
	if got := h.secretOf(ss, nil); got.ResourceVersion != rv {
		t.Errorf("the Secret was written again (resourceVersion %s → %s) with nothing to change", rv, got.ResourceVersion)
	}
	if got := h.get(ss); got.ResourceVersion != cur.ResourceVersion {
		t.Errorf("status rewritten with nothing to change")
	}

	// An immutable Secret whose data changes is recreated too.
	h.update(ss, func(cur *kubelbv1alpha1.SyncSecret) { cur.Immutable = ptr.To(true) })
	s3 := h.secretOf(ss, func(s *corev1.Secret) error {
		if s.Immutable == nil || !*s.Immutable {
			return errors.New("not immutable yet")
		}
		return nil
	})
	crt2, key2 := testsupport.SelfSignedPEM(t, "renewed.example.com")
	cur = h.update(ss, func(cur *kubelbv1alpha1.SyncSecret) {
		cur.Data = map[string][]byte{corev1.TLSCertKey: crt2, corev1.TLSPrivateKeyKey: key2}
	})
	s4 := h.secretOf(ss, func(s *corev1.Secret) error {
		if !bytes.Equal(s.Data[corev1.TLSCertKey], crt2) {
			return errors.New("old certificate")
		}
		return nil
	})
	if s4.UID == s3.UID || s4.Immutable == nil || !*s4.Immutable {
		t.Errorf("immutable Secret with new data: UID %s → %s, immutable %v; want a new immutable Secret", s3.UID, s4.UID, s4.Immutable)
	}
	cur = h.waitSynced(ss, metav1.ConditionTrue, ReasonSynced)

	// Deleted: garbage collection (not run by envtest) removes the Secret through its
	// controller reference, asserted above.
	if err := h.Client.Delete(t.Context(), cur); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, wait, "SyncSecret gone", func() error {
		err := h.Client.Get(t.Context(), client.ObjectKeyFromObject(ss), &kubelbv1alpha1.SyncSecret{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errors.New("still there")
	})
}

// A Secret of the hub Secret's name that kubelb did not make is never taken over: Synced is
// False with reason SecretConflict and a Warning Event. SyncSecrets in namespaces not managed
// by kubelb are left alone, and invalid ones are reported.
func TestForeignSecretAndInvalid(t *testing.T) {
	h := startHub(t)
	h.namespace("tenant-late", false)
	ss := syncSecret("tenant-late", "u-2", "shop", "app-tls", corev1.SecretTypeOpaque, map[string][]byte{"k": []byte("tenant")})
	h.create(ss)
	foreign := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-late", Name: string(ss.UID), Labels: map[string]string{"app": "someone-else"}},
		Data:       map[string][]byte{"k": []byte("theirs")},
	}
	h.create(foreign)
	testenv.WaitControllerIdle(t, controllerName, 1)
	if len(h.get(ss).Status.Conditions) != 0 {
		t.Errorf("SyncSecret in an unmanaged namespace got a status: %+v", h.get(ss).Status)
	}

	nsObj := &corev1.Namespace{}
	if err := h.Client.Get(t.Context(), client.ObjectKey{Name: "tenant-late"}, nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels = map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}
	if err := h.Client.Update(t.Context(), nsObj); err != nil {
		t.Fatal(err)
	}
	cur := h.waitSynced(ss, metav1.ConditionFalse, ReasonSecretConflict)
	if cur.Status.Phase != PhaseFailed {
		t.Errorf("phase %q, want Failed", cur.Status.Phase)
	}
	t.Logf("condition: %s", meta.FindStatusCondition(cur.Status.Conditions, ConditionSynced).Message)
	got := &corev1.Secret{}
	if err := h.Client.Get(t.Context(), client.ObjectKeyFromObject(foreign), got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 || string(got.Data["k"]) != "theirs" || got.Labels[LabelSyncSecret] != "" {
		t.Errorf("the foreign Secret was touched: %+v", got)
	}
	testsupport.Eventually(t, wait, "SecretConflict Event", func() error {
		list := &eventsv1.EventList{}
		if err := h.Client.List(t.Context(), list, client.InNamespace("tenant-late")); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Regarding.UID == ss.UID && ev.Reason == ReasonSecretConflict && ev.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return errors.New("none yet")
	})

	// A TLS SyncSecret without its key cannot become a Secret.
	h.namespace("tenant-probe", true)
	bad := syncSecret("tenant-probe", "u-3", "shop", "half-tls", corev1.SecretTypeTLS, map[string][]byte{corev1.TLSCertKey: []byte("c")})
	h.create(bad)
	cur = h.waitSynced(bad, metav1.ConditionFalse, ReasonInvalid)
	t.Logf("condition: %s", meta.FindStatusCondition(cur.Status.Conditions, ConditionSynced).Message)
	if err := h.Client.Get(t.Context(), client.ObjectKey{Namespace: "tenant-probe", Name: string(cur.UID)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("invalid SyncSecret: want no Secret, got %v", err)
	}
}

// The SyncSecret KubeLB CE's ccm wrote (with a real certificate in place of the redacted one)
// becomes a Secret; its CE cleanup finalizer is honoured on deletion.
func TestCESyncSecretFixture(t *testing.T) {
	raw, err := os.ReadFile("/work/shared/fixtures/kubelb-ce/hub-syncsecrets.yaml")
	if err != nil {
		t.Skipf("CE fixture not available: %v", err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	crt, key := testsupport.SelfSignedPEM(t, "shop.example.com")
	obj["data"] = map[string]any{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key} // []byte → base64
	delete(obj, "status")
	md := obj["metadata"].(map[string]any)
	delete(md, "uid")
	delete(md, "generation")
	js, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	ss := &kubelbv1alpha1.SyncSecret{}
	if err := yaml.Unmarshal(js, ss); err != nil {
		t.Fatal(err)
	}

	h := startHub(t)
	h.namespace(ss.Namespace, true)
	h.create(ss)
	s := h.secretOf(ss, nil)
	checkOwned(t, s, ss)
	if s.Type != corev1.SecretTypeTLS || !bytes.Equal(s.Data[corev1.TLSCertKey], crt) || !bytes.Equal(s.Data[corev1.TLSPrivateKeyKey], key) {
		t.Errorf("Secret type %q or data differ from the SyncSecret's", s.Type)
	}
	if s.Labels[kubelbv1alpha1.LabelOriginName] != "app-tls" || s.Labels[kubelbv1alpha1.LabelOriginNamespace] != "shop" {
		t.Errorf("labels %v: want origin shop/app-tls", s.Labels)
	}
	cur := h.waitSynced(ss, metav1.ConditionTrue, ReasonSynced)
	if cur.Status.Phase != PhaseSynced || meta.FindStatusCondition(cur.Status.Conditions, ConditionSynced).Message != MessageSynced {
		t.Errorf("status %+v differs from CE's", cur.Status)
	}

	if err := h.Client.Delete(t.Context(), cur); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, wait, "SyncSecret and Secret gone", func() error {
		if err := h.Client.Get(t.Context(), client.ObjectKeyFromObject(ss), &kubelbv1alpha1.SyncSecret{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("SyncSecret: %v", err)
		}
		if err := h.Client.Get(t.Context(), client.ObjectKeyFromObject(s), &corev1.Secret{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Secret: %v", err)
		}
		return nil
	})
}
