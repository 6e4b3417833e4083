package helm

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// policyMessage is what the manager chart's ValidatingAdmissionPolicy answers a write outside
// kubelb's namespaces with.
const policyMessage = "the kubelb manager may write only"

// mustRefuseByPolicy: the request was refused by the admission policy (403, its message), not
// by RBAC.
func mustRefuseByPolicy(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policyMessage) {
		t.Errorf("%s: err %v, want Forbidden by the admission policy (%q)", what, err, policyMessage)
	}
}

// waitForAdmissionPolicy waits until the API server enforces the chart's policy (it loads
// policies asynchronously), probing with a dry-run write outside kubelb's namespaces.
func waitForAdmissionPolicy(t *testing.T, m client.Client, elsewhere string) {
	t.Helper()
	testsupport.Eventually(t, time.Minute, "the admission policy refuses the manager's writes in "+elsewhere, func() error {
		err := m.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: "probe"}}, client.DryRunAll)
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), policyMessage) {
			return nil
		}
		return fmt.Errorf("dry-run create answered %v", err)
	})
}

// checkExactRules: in each namespace, the rules the ServiceAccount saNS/sa holds
// (SelfSubjectRulesReview), less those of any ServiceAccount of its namespace (discovery,
// self reviews), are exactly want's permissions there (cluster-wide ones, and those of that
// namespace).
func checkExactRules(t *testing.T, hub *testenv.Cluster, saNS, sa string, want []Permission, namespaces ...string) {
	t.Helper()
	ctx := context.Background()
	mgr, nobody := ImpersonatedConfig(hub, saNS, sa), ImpersonatedConfig(hub, saNS, "nobody")
	for _, n := range namespaces {
		got, err := Rules(ctx, mgr, n)
		must(t, "rules review as "+sa+" in "+n, err)
		base, err := Rules(ctx, nobody, n)
		must(t, "rules review as another ServiceAccount in "+n, err)
		var wantHere []Permission
		for _, p := range want {
			if p.Namespace == "" || p.Namespace == n {
				p.Namespace = n
				wantHere = append(wantHere, p)
			}
		}
		_, granted := diffPermissions(base, got) // in got, not in base
		_, expected := diffPermissions(base, wantHere)
		extra, missing := diffPermissions(granted, expected)
		for _, p := range extra {
			t.Errorf("%s holds %s, beyond what it needs", sa, p)
		}
		for _, p := range missing {
			t.Errorf("%s lacks %s", sa, p)
		}
		t.Logf("namespace %s: %s holds exactly its %d permissions", n, sa, len(granted))
	}
}

// checkAdmissionPolicy: with the policy enforced, the manager's writes (which RBAC allows in
// every namespace) are refused outside kubelb's namespaces and allowed in them.
func checkAdmissionPolicy(t *testing.T, hub *testenv.Cluster, m client.Client, tenantNS, elsewhere string) {
	t.Helper()
	ctx := context.Background()
	envoy := func(namespace string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "envoy-vap"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "envoy"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "envoy"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "envoy", Image: "envoyproxy/envoy"}}}}}}
	}
	// Outside kubelb's namespaces: Deployments, Secrets, Roles, Events, nothing is written.
	mustRefuseByPolicy(t, "creating a Deployment in "+elsewhere, m.Create(ctx, envoy(elsewhere)))
	mustRefuseByPolicy(t, "creating a Secret in "+elsewhere, m.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: "stolen"}}))
	mustRefuseByPolicy(t, "creating an Event in "+elsewhere, m.Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: "e.1"},
		EventTime: metav1.NowMicro(), ReportingController: "kubelb", ReportingInstance: "kubelb-0", Action: "X", Reason: "X", Type: corev1.EventTypeNormal,
		Regarding: corev1.ObjectReference{Kind: "ConfigMap", Namespace: elsewhere, Name: "x", APIVersion: "v1"}}))
	victim := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: "victim"}, StringData: map[string]string{"k": "v"}}
	must(t, "creating a Secret as admin in "+elsewhere, hub.Client.Create(ctx, victim))
	mustRefuseByPolicy(t, "patching a Secret in "+elsewhere, m.Patch(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: "victim"}},
		client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"eA=="}}`))))
	mustRefuseByPolicy(t, "deleting a Secret in "+elsewhere, m.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: "victim"}}))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: "settings"}}
	must(t, "creating a ConfigMap as admin in "+elsewhere, hub.Client.Create(ctx, cm))
	mustRefuseByPolicy(t, "deleting every ConfigMap in "+elsewhere, m.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(elsewhere)))
	must(t, "getting the ConfigMap the manager tried to delete", hub.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm))

	// Tokens: RBAC allows them for a ServiceAccount named kubelb-ccm anywhere; the policy only
	// in kubelb's namespaces. For any other ServiceAccount RBAC refuses them.
	must(t, "creating a kubelb-ccm ServiceAccount as admin in "+elsewhere, hub.Client.Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: "kubelb-ccm"}}))
	must(t, "creating ServiceAccount other as admin in "+tenantNS, hub.Client.Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "other"}}))
	cs, err := kubernetes.NewForConfig(ImpersonatedConfig(hub, ns, "kubelb-manager"))
	must(t, "clientset", err)
	_, err = cs.CoreV1().ServiceAccounts(elsewhere).CreateToken(ctx, "kubelb-ccm", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	mustRefuseByPolicy(t, "minting a token for "+elsewhere+"/kubelb-ccm", err)
	_, err = cs.CoreV1().ServiceAccounts(tenantNS).CreateToken(ctx, "other", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	mustForbid(t, "minting a token for "+tenantNS+"/other", err)

	// Namespaces: only tenant-* ones labelled as kubelb's are created, adopted or deleted.
	managed := map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}
	mustRefuseByPolicy(t, "creating a labelled namespace not named tenant-*", m.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-evil", Labels: managed}}))
	mustRefuseByPolicy(t, "creating an unlabelled tenant namespace", m.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubelbv1alpha1.TenantNamespacePrefix + "bare"}}))
	mustRefuseByPolicy(t, "labelling "+elsewhere+" as kubelb's", m.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: elsewhere}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+kubelbv1alpha1.LabelManagedBy+`":"kubelb"}}}`))))
	mustRefuseByPolicy(t, "deleting namespace "+elsewhere, m.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: elsewhere}}))
	adopt := kubelbv1alpha1.TenantNamespacePrefix + "adopted"
	must(t, "creating namespace "+adopt+" as admin", hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: adopt}}))
	must(t, "adopting namespace "+adopt+" (labelling it)", m.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: adopt}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+kubelbv1alpha1.LabelManagedBy+`":"kubelb"}}}`))))

	// In kubelb's namespaces the same writes work: the tenant namespace, the manager's own
	// (e.g. a CA Secret), and Events about cluster-scoped Tenants in default.
	d := envoy(tenantNS)
	must(t, "creating a Deployment in "+tenantNS, m.Create(ctx, d))
	must(t, "deleting it", m.Delete(ctx, d))
	must(t, "creating a Secret in "+ns, m.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubelb-ca"}}))
	must(t, "recording an Event about a Tenant in default", m.Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "shop.1"},
		EventTime: metav1.NowMicro(), ReportingController: "kubelb", ReportingInstance: "kubelb-0", Action: "Provision", Reason: "Provisioned", Type: corev1.EventTypeNormal,
		Regarding: corev1.ObjectReference{Kind: "Tenant", Name: tenantName, APIVersion: kubelbv1alpha1.GroupVersion.String()}}))
	must(t, "deleting the adopted namespace", m.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: adopt}}))

	// The admin is not concerned: the policy matches the manager only.
	must(t, "deleting the Secret in "+elsewhere+" as admin", hub.Client.Delete(ctx, victim))
}
