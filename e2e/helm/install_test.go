package helm

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/manager/admission"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// checkRBAC proves, as the impersonated ServiceAccount, that every permission in need is
// granted and every one in forbidden is denied.
func checkRBAC(t *testing.T, cfg *rest.Config, need, forbidden []Permission) {
	t.Helper()
	ctx := context.Background()
	_, denied, err := Allowed(ctx, cfg, dedupe(need))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range denied {
		t.Errorf("chart does not grant %s", p)
	}
	allowed, _, err := Allowed(ctx, cfg, dedupe(forbidden))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range allowed {
		t.Errorf("chart grants %s, which the binary must not have", p)
	}
	t.Logf("%d permissions granted, %d denied as they must be", len(dedupe(need)), len(dedupe(forbidden)))
}

func impersonatedClient(t *testing.T, c *testenv.Cluster, namespace, sa string) client.Client {
	t.Helper()
	cl, err := client.New(ImpersonatedConfig(c, namespace, sa), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func mustForbid(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: err %v, want Forbidden", what, err)
	}
}

// TestManagerChartInstallAndRBAC installs the manager chart (full values) into a hub without
// kubelb's CRDs: the chart's crds/ installs them and Config "default" is accepted. Then, as
// the chart's ServiceAccount, it checks every permission the manager needs (its controllers'
// rbac markers and leader election), that it holds exactly those (rules reviews per
// namespace) and none of ManagerForbidden, and performs a tenant onboarding with real
// requests: the API server's escalation check proves the manager may grant the ccm's Role.
// The chart's admission policy is enforced throughout: the same writes outside kubelb's
// namespaces are refused (checkAdmissionPolicy).
func TestManagerChartInstallAndRBAC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hub := testenv.Start(t, "hub", testenv.Options{WithoutKubelbCRDs: true, GatewayAPIChannel: "standard"})
	// A tenant namespace that exists at install time: the chart renders no NetworkPolicy into
	// it (the manager keeps one in every tenant namespace, whenever it is onboarded). Another
	// namespace is where the admission policy refuses the manager's writes.
	for name, labels := range map[string]map[string]string{
		"tenant-np": {kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}, "not-a-tenant": nil,
	} {
		must(t, "creating namespace "+name, hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}))
	}
	// ServiceMonitor and PrometheusRule need the Prometheus Operator's CRDs, which envtest
	// lacks; helm template covers them.
	out := Install(t, hub, ManagerChart, "kubelb-manager", ns, "-f", FullValues(ManagerChart), "--set", "serviceMonitor.enabled=false", "--set", "prometheusRule.enabled=false")
	if !strings.Contains(out, "STATUS: deployed") {
		t.Fatalf("helm install:\n%s", out)
	}

	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	must(t, "listing CRDs", hub.Client.List(ctx, crds))
	var kubelbCRDs []string
	for _, c := range crds.Items {
		if c.Spec.Group == kubelbv1alpha1.GroupVersion.Group {
			kubelbCRDs = append(kubelbCRDs, c.Spec.Names.Kind)
		}
	}
	slices.Sort(kubelbCRDs)
	if want := generatedCRDKinds(t); !slices.Equal(kubelbCRDs, want) || !slices.Contains(want, "LoadBalancer") {
		t.Errorf("kubelb CRDs installed by the chart: %v, want %v", kubelbCRDs, want)
	}
	checkWebhookConfiguration(t, hub, ns)
	cfg := &kubelbv1alpha1.Config{}
	must(t, "getting Config default", hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kubelbv1alpha1.DefaultConfigName}, cfg))
	if cfg.Spec.EnvoyProxy.Image != "docker.io/envoyproxy/envoy:v1.40.0" || cfg.Spec.EnvoyProxy.Replicas != 2 ||
		ptr.Deref(cfg.Spec.LoadBalancer.Class, "") != "metallb" || cfg.Spec.EnvoyProxy.GracefulShutdown == nil {
		t.Errorf("Config default spec from values: %+v", cfg.Spec)
	}
	dep := &appsv1.Deployment{}
	must(t, "getting Deployment", hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kubelb-manager"}, dep))
	if r := ptr.Deref(dep.Spec.Replicas, 0); r != 3 || dep.Spec.Strategy.RollingUpdate == nil || dep.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Errorf("Deployment: %d replicas, strategy %+v; want 3 replicas, none unavailable during a rollout", r, dep.Spec.Strategy)
	}
	pdb := &policyv1.PodDisruptionBudget{}
	must(t, "getting the PodDisruptionBudget", hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kubelb-manager"}, pdb))
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 || pdb.Spec.Selector == nil ||
		!labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("PodDisruptionBudget spec %+v: want minAvailable 2 over the manager pods %v", pdb.Spec, dep.Spec.Template.Labels)
	}
	checkDefaultHAAccepted(t, hub)
	must(t, "getting Service kubelb", hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kubelb"}, &corev1.Service{}))
	nps := &networkingv1.NetworkPolicyList{}
	must(t, "listing NetworkPolicies", hub.Client.List(ctx, nps))
	var npAt []string
	for _, np := range nps.Items {
		npAt = append(npAt, np.Namespace+"/"+np.Name)
	}
	if len(npAt) > 0 {
		t.Errorf("the chart installed NetworkPolicies %v; the manager makes them", npAt)
	}
	cms := &corev1.ConfigMapList{}
	must(t, "listing dashboards", hub.Client.List(ctx, cms, client.InNamespace(ns), client.MatchingLabels{"grafana_dashboard": "1"}))
	if len(cms.Items) != 3 { // the manager, Envoy control plane and Envoy data plane dashboards
		t.Errorf("%d dashboard ConfigMaps, want 3", len(cms.Items))
	}

	markers := managerMarkers(t, ns)
	t.Logf("%d permissions from +kubebuilder:rbac markers under internal/manager", len(markers))
	checkRBAC(t, ImpersonatedConfig(hub, ns, "kubelb-manager"), append(ManagerPermissions(ns), markers...), ManagerForbidden("not-a-tenant", "tenant-np"))
	// Exactly these, nothing more: in the manager's namespace, kube-public (cluster-info), a
	// tenant namespace and any other.
	checkExactRules(t, hub, ns, "kubelb-manager", append(ManagerPermissions(ns), markers...), ns, "kube-public", "tenant-np", "not-a-tenant")
	m := impersonatedClient(t, hub, ns, "kubelb-manager")
	waitForAdmissionPolicy(t, m, "not-a-tenant")

	// Real requests as the manager, the way tenant onboarding and an L4 load balancer use them.
	must(t, "creating kube-public/cluster-info", hub.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-public", Name: "cluster-info"}, Data: map[string]string{"kubeconfig": "x"}}))
	hub.Client.Create(ctx, &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tenantName}}) //nolint:errcheck // checked by the Get below
	tns := kubelbv1alpha1.TenantNamespacePrefix + tenantName
	must(t, "reading cluster-info", m.Get(ctx, client.ObjectKey{Namespace: "kube-public", Name: "cluster-info"}, &corev1.ConfigMap{}))
	tenant := &kubelbv1alpha1.Tenant{}
	must(t, "getting the Tenant", m.Get(ctx, client.ObjectKey{Name: tenantName}, tenant))
	tenant.Status.Phase = kubelbv1alpha1.TenantPhaseProvisioning
	must(t, "updating Tenant status", m.Status().Update(ctx, tenant))
	must(t, "creating the tenant namespace", m.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tns,
		Labels: map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue}}}))
	must(t, "creating the ccm ServiceAccount", m.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: "kubelb-ccm"}}))
	ccmRules := []rbacv1.PolicyRule{
		{APIGroups: []string{"kubelb.k8c.io"}, Resources: []string{"loadbalancers", "routes", "addresses", "syncsecrets"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"kubelb.k8c.io"}, Resources: []string{"tenantstates"}, Verbs: []string{"get", "list", "watch"}},
		// The ccm renews its own token.
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{"kubelb-ccm"}, Verbs: []string{"create"}},
	}
	must(t, "creating the ccm Role", m.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: "kubelb-ccm"}, Rules: ccmRules}))
	must(t, "creating the ccm RoleBinding", m.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: "kubelb-ccm"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "kubelb-ccm"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "kubelb-ccm", Namespace: tns}}}))
	mustForbid(t, "creating a Role granting pods (more than the manager holds)", m.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: "too-much"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}}}}))
	cs, err := kubernetes.NewForConfig(ImpersonatedConfig(hub, ns, "kubelb-manager"))
	must(t, "clientset", err)
	tr, err := cs.CoreV1().ServiceAccounts(tns).CreateToken(ctx, "kubelb-ccm", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	must(t, "requesting a token for the ccm", err)
	must(t, "creating the ccm kubeconfig Secret", m.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: kubelbv1alpha1.CCMKubeconfigSecretName},
		Data:       map[string][]byte{kubelbv1alpha1.CCMKubeconfigSecretKey: []byte(tr.Status.Token)}}))
	must(t, "creating the TenantState", m.Create(ctx, &kubelbv1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: "default"}}))
	must(t, "creating the tenant's ResourceQuota", m.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: "kubelb-tenant"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/loadbalancers.kubelb.k8c.io": resource.MustParse("10")}}}))
	must(t, "creating the Envoy fleet's NetworkPolicy", m.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: "kubelb-envoy"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}}))

	lb := &kubelbv1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: "uid-1"},
		Spec: kubelbv1alpha1.LoadBalancerSpec{
			Endpoints: []kubelbv1alpha1.LoadBalancerEndpoints{{Addresses: []kubelbv1alpha1.EndpointAddress{{IP: "10.0.0.1"}},
				Ports: []kubelbv1alpha1.EndpointPort{{Port: 30080, Protocol: corev1.ProtocolTCP}}}},
			Ports: []kubelbv1alpha1.LoadBalancerPort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	must(t, "creating a LoadBalancer (as the ccm would, via admin)", hub.Client.Create(ctx, lb))
	must(t, "getting the LoadBalancer", m.Get(ctx, client.ObjectKeyFromObject(lb), lb))
	lb.Finalizers = append(lb.Finalizers, kubelbv1alpha1.CleanupFinalizer)
	must(t, "adding the finalizer", m.Update(ctx, lb))
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	must(t, "writing LoadBalancer status", m.Status().Update(ctx, lb))

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: "lb-uid-1"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		Selector: map[string]string{"app": "envoy"}}}
	must(t, "creating the hub Service", m.Create(ctx, svc))
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	mustForbid(t, "writing hub Service status (a load balancer implementation's)", m.Status().Update(ctx, svc))
	must(t, "creating the Envoy Deployment", m.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: "envoy"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "envoy"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "envoy"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "envoy", Image: cfg.Spec.EnvoyProxy.Image}}}}}}))
	must(t, "creating the Envoy bootstrap ConfigMap", m.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: "envoy-bootstrap"}}))
	must(t, "recording an Event", m.Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: tns, Name: "lb.1"},
		EventTime: metav1.NowMicro(), ReportingController: "kubelb", ReportingInstance: "kubelb-0", Action: "Allocate",
		Reason: "PortsAllocated", Type: corev1.EventTypeNormal,
		Regarding: corev1.ObjectReference{Kind: "LoadBalancer", Namespace: tns, Name: lb.Name, APIVersion: "kubelb.k8c.io/v1alpha1"}}))
	mustForbid(t, "listing Gateways (the ccm mirrors them; the manager reads Routes)", m.List(ctx, &gwapiv1.GatewayList{}))
	must(t, "taking the leader lease", m.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubelb-manager.kubelb.k8c.io"}}))
	mustForbid(t, "taking a lease in kube-system", m.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "x"}}))
	mustForbid(t, "creating a ClusterRole", m.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "x"}}))
	mustForbid(t, "deleting a CRD", m.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "tenants.kubelb.k8c.io"}}))
	checkAdmissionPolicy(t, hub, m, tns, "not-a-tenant")

	// The token the manager minted works for the ccm's ServiceAccount, confined to its namespace.
	ccmCfg := rest.AnonymousClientConfig(hub.Config)
	ccmCfg.BearerToken = tr.Status.Token
	ccm, err := client.New(ccmCfg, client.Options{Scheme: testenv.Scheme()})
	must(t, "ccm client", err)
	must(t, "ccm lists its LoadBalancers", ccm.List(ctx, &kubelbv1alpha1.LoadBalancerList{}, client.InNamespace(tns)))
	mustForbid(t, "ccm lists Secrets", ccm.List(ctx, &corev1.SecretList{}, client.InNamespace(tns)))
}

// TestCCMChartInstallAndRBAC installs the ccm chart (full values: every feature on) into a
// tenant cluster and checks, as its ServiceAccount, every permission the ccm needs (by design
// and from its controllers' rbac markers) with access reviews and real requests.
func TestCCMChartInstallAndRBAC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tenant := testenv.Start(t, "tenant", testenv.Options{WithoutKubelbCRDs: true, GatewayAPIChannel: "standard"})
	for _, n := range []string{ns, "monitoring"} {
		must(t, "creating namespace "+n, tenant.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}))
	}
	must(t, "creating the hub kubeconfig Secret", tenant.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubelb-hub"},
		Data:       map[string][]byte{"kubelb": []byte("apiVersion: v1\nkind: Config\n")}}))
	out := Install(t, tenant, CCMChart, "kubelb-ccm", ns, "-f", FullValues(CCMChart), "--set", "serviceMonitor.enabled=false", "--set", "prometheusRule.enabled=false")
	if !strings.Contains(out, "STATUS: deployed") {
		t.Fatalf("helm install:\n%s", out)
	}
	must(t, "getting Deployment", tenant.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kubelb-ccm"}, &appsv1.Deployment{}))
	must(t, "getting the dashboard", tenant.Client.Get(ctx, client.ObjectKey{Namespace: "monitoring", Name: "kubelb-ccm-dashboard"}, &corev1.ConfigMap{}))

	markers, err := MarkerPermissions(filepath.Join(testsupport.RepoRoot(), "internal", "ccm"))
	must(t, "reading the ccm's rbac markers", err)
	var tenantSide []Permission
	for _, p := range markers {
		if p.Group != kubelbv1alpha1.GroupVersion.Group { // kubelb's kinds are on the hub, granted by the Tenant's Role
			tenantSide = append(tenantSide, p)
		}
	}
	t.Logf("%d tenant-side permissions from +kubebuilder:rbac markers under internal/ccm", len(tenantSide))
	all := CCMFeatures{CloudProvider: true, Ingress: true, GatewayAPI: true, SecretSync: true, InstallGatewayCRDs: true, HubKubeconfigSecret: "kubelb-hub"}
	checkRBAC(t, ImpersonatedConfig(tenant, ns, "kubelb-ccm"), append(CCMPermissions(ns, all), tenantSide...), CCMForbidden(all))

	// Real requests as the ccm.
	must(t, "creating a Node", tenant.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}))
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: ptr.To(kubelbv1alpha1.DefaultClass),
		Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	must(t, "creating a LoadBalancer Service", tenant.Client.Create(ctx, svc))
	c := impersonatedClient(t, tenant, ns, "kubelb-ccm")
	must(t, "listing Nodes", c.List(ctx, &corev1.NodeList{}))
	must(t, "listing Services", c.List(ctx, &corev1.ServiceList{}))
	must(t, "getting the Service", c.Get(ctx, client.ObjectKeyFromObject(svc), svc))
	svc.Finalizers = append(svc.Finalizers, kubelbv1alpha1.CleanupFinalizer)
	must(t, "adding the cleanup finalizer", c.Update(ctx, svc))
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	must(t, "writing Service status", c.Status().Update(ctx, svc))
	must(t, "recording an Event", c.Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web.1"},
		EventTime: metav1.NowMicro(), ReportingController: "kubelb-ccm", ReportingInstance: "ccm-0", Action: "Mirror",
		Reason: "Mirrored", Type: corev1.EventTypeNormal, Regarding: corev1.ObjectReference{Kind: "Service", Namespace: "default", Name: "web", APIVersion: "v1"}}))
	must(t, "taking the leader lease", c.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubelb-ccm.kubelb.k8c.io"}}))
	must(t, "listing HTTPRoutes", c.List(ctx, &gwapiv1.HTTPRouteList{}))
	must(t, "listing Secrets", c.List(ctx, &corev1.SecretList{}))
	must(t, "updating a Gateway API CRD", c.Patch(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "gateways.gateway.networking.k8s.io"}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"kubelb.k8c.io/installed-by":"ccm"}}}`))))
	// The NodePort twin of a ClusterIP backend (Ingress, Gateway API): created and deleted.
	twin := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-nodeport"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	must(t, "creating a NodePort twin", c.Create(ctx, twin))
	must(t, "deleting the NodePort twin", c.Delete(ctx, twin))
	mustForbid(t, "deleting a Namespace", c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}))
	mustForbid(t, "creating a Secret", c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}}))
	// Writing the renewed hub token back: that one Secret only.
	hubSecret := &corev1.Secret{}
	must(t, "reading the hub kubeconfig Secret", c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kubelb-hub"}, hubSecret))
	hubSecret.Data["kubelb"] = []byte("apiVersion: v1\nkind: Config\ncurrent-context: renewed\n")
	must(t, "writing a renewed token into the hub kubeconfig Secret", c.Update(ctx, hubSecret))
	must(t, "creating another Secret (as admin)", tenant.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}}))
	mustForbid(t, "updating another Secret", c.Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}}))
	mustForbid(t, "deleting the hub kubeconfig Secret", c.Delete(ctx, hubSecret))
	mustForbid(t, "deleting a CRD", c.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "gateways.gateway.networking.k8s.io"}}))
	mustForbid(t, "taking a lease in kube-system", c.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "x"}}))

	checkImpersonatedKubeconfig(t, tenant)
}

// checkImpersonatedKubeconfig: the kubeconfig the e2e hands to a binary acts as the
// ServiceAccount, not as the admin.
func checkImpersonatedKubeconfig(t *testing.T, c *testenv.Cluster) {
	t.Helper()
	path := ImpersonatedKubeconfig(t, c, "default", "nobody")
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	must(t, "loading the kubeconfig", err)
	cs, err := kubernetes.NewForConfig(cfg)
	must(t, "clientset", err)
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	must(t, "self subject review", err)
	if u := review.Status.UserInfo; u.Username != "system:serviceaccount:default:nobody" || !slices.Contains(u.Groups, "system:serviceaccounts:default") {
		t.Errorf("kubeconfig authenticates as %+v", u)
	}
	_, err = cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	mustForbid(t, "listing namespaces as a ServiceAccount without RBAC", err)
}

// checkDefaultHAAccepted: the API server accepts the default render's Deployment (2 replicas,
// surge 1, none unavailable, the anti-affinity) and PodDisruptionBudget (maxUnavailable 1)
// as they are (server-side dry run, under another release name).
func checkDefaultHAAccepted(t *testing.T, hub *testenv.Cluster) {
	t.Helper()
	objs := Template(t, ManagerChart, "kubelb-default", ns)
	for _, kind := range []string{"Deployment", "PodDisruptionBudget"} {
		o := find(t, objs, kind, "kubelb-default-kubelb-manager")
		must(t, "dry-run creating the default "+kind, hub.Client.Create(context.Background(), o, client.DryRunAll))
	}
}

// checkWebhookConfiguration: the chart's ValidatingWebhookConfiguration is the manager's own
// definition (admission.Configuration) through the chart's Service; caBundle is the
// manager's to set. Then it is deleted: no manager runs in this test to answer it, and the
// test goes on to write LoadBalancers (the webhook itself: cmd/kubelb TestHostileTenantEtcdBytes,
// e2e TestL4AsInstalledByHelm).
func checkWebhookConfiguration(t *testing.T, hub *testenv.Cluster, ns string) {
	t.Helper()
	ctx := t.Context()
	got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	must(t, "getting the chart's ValidatingWebhookConfiguration", hub.Client.Get(ctx, client.ObjectKey{Name: admission.ConfigurationName}, got))
	want := admission.Configuration(admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
		Namespace: ns, Name: "kubelb", Path: ptr.To(admission.Path), Port: ptr.To[int32](8443)}})
	if len(got.Webhooks) != 1 || !equality.Semantic.DeepEqual(got.Webhooks, want.Webhooks) {
		t.Errorf("the chart's webhooks:\n%s\nwant (admission.Configuration):\n%s", jsonString(got.Webhooks), jsonString(want.Webhooks))
	}
	must(t, "deleting the ValidatingWebhookConfiguration", hub.Client.Delete(ctx, got))
}
