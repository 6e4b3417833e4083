package tenantside

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/ccm"
	"kubelb.dev/kubelb/internal/ccm/source"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/tenant"
	"kubelb.dev/kubelb/internal/nodeip"
	"kubelb.dev/kubelb/internal/routekind"
)

// TenantEnv is what check tenant works with: the tenant cluster, the ccm's Deployment (nil:
// none found), and the hub as the ccm's kubeconfig reaches it.
type TenantEnv struct {
	Tenant client.Reader
	CCM    *CCM
	Hub    *Hub
	// HubErr is why the hub kubeconfig could not be read (Hub is then nil).
	HubErr error
	// HubClient and HubClientset reach the hub with Hub.Config.
	HubClient    client.Reader
	HubClientset kubernetes.Interface
	// NodeAddressType overrides the ccm's --node-address-type ("" : the ccm's).
	NodeAddressType string
	// Now is the time tokens are judged at.
	Now time.Time
}

// CheckTenant runs the checks of check tenant in order; pre keeps those that make sense
// before the ccm is installed.
func CheckTenant(ctx context.Context, env TenantEnv, pre bool) []Step {
	steps := []Step{ccmStep(env, pre)}
	steps = append(steps, hubSteps(ctx, env)...)
	if !pre {
		steps = append(steps, leaseStep(ctx, env))
	}
	steps = append(steps, nodeAddressStep(ctx, env), gatewayCRDStep(ctx, env))
	if !pre {
		steps = append(steps, ingressClassStep(ctx, env), gatewayClassStep(ctx, env))
	}
	return steps
}

// ccmStep names the ccm's Deployment and the flags the checks read.
func ccmStep(env TenantEnv, pre bool) Step {
	const name = "ccm Deployment"
	c := env.CCM
	switch {
	case c == nil:
		return skipped(name, "none labelled app.kubernetes.io/name=%s; the checks assume the ccm's default flags", ccmAppName)
	case !pre && c.ReadyReplicas == 0:
		return failed(name, fmt.Sprintf("kubectl -n %s describe deployment %s; kubectl -n %s logs deployment/%s", c.Namespace, c.Name, c.Namespace, c.Name),
			"%s/%s has no ready replica (of %d)", c.Namespace, c.Name, c.Replicas)
	}
	return ok(name, "%s/%s, %d/%d ready", c.Namespace, c.Name, c.ReadyReplicas, c.Replicas)
}

// hubSteps: the hub kubeconfig, the hub reachable, the token's expiry, the permissions and
// the tenant's state on the hub.
func hubSteps(ctx context.Context, env TenantEnv) []Step {
	if env.Hub == nil {
		return []Step{failed("hub kubeconfig", "pass --hub-kubeconfig FILE (the hub's Secret kubelb-ccm-kubeconfig of your tenant, key kubelb), or install it as the kubelb-ccm chart expects (kubelb.kubeconfigSecretName)", "%v", env.HubErr)}
	}
	h := env.Hub
	steps := []Step{ok("hub kubeconfig", "%s, namespace %s", h.Source, h.Namespace)}
	steps = append(steps, tokenStep(h, env.Now))
	v, err := env.HubClientset.Discovery().ServerVersion()
	if err != nil {
		return append(steps, failed("hub reachable", hubErrorHint(err, h), "%s: %v", h.Config.Host, err))
	}
	steps = append(steps, ok("hub reachable", "%s (Kubernetes %s)", h.Config.Host, v.GitVersion))
	steps = append(steps, permissionsStep(ctx, env))
	ts := &v1alpha1.TenantState{}
	if err := env.HubClient.Get(ctx, client.ObjectKey{Namespace: h.Namespace, Name: hubnames.TenantStateName}, ts); err != nil {
		return append(steps, failed("hub tenant", hubErrorHint(err, h), "reading TenantState %s/%s: %v", h.Namespace, hubnames.TenantStateName, err))
	}
	switch {
	case len(ts.Status.Rejections) > 0:
		return append(steps, failed("hub tenant", "the tenant's Envoy proxies rejected its configuration: `kubectl kubelb status` on your objects names the one; tell the platform team",
			"%d Envoy rejection(s), first: %s", len(ts.Status.Rejections), ts.Status.Rejections[0].Message))
	case ts.Status.LoadBalancer.Disable:
		return append(steps, failed("hub tenant", "the platform team disabled load balancing for your tenant (Tenant or Config spec.loadBalancer.disable)", "layer-4 load balancing is disabled"))
	}
	return append(steps, ok("hub tenant", "manager %s, no Envoy rejections", ts.Status.Version.GitVersion))
}

// tokenStep reads the token's expiry without verifying it.
func tokenStep(h *Hub, now time.Time) Step {
	const name = "hub token"
	if h.Token == "" {
		return skipped(name, "the hub kubeconfig has no bearer token (client certificate or exec plugin)")
	}
	exp, found := TokenExpiry(h.Token)
	switch {
	case !found:
		return skipped(name, "not a JWT with an expiry")
	case !exp.After(now):
		return failed(name, fmt.Sprintf("the ccm renews its token only while it is valid: ask the platform team for a fresh copy of the hub's Secret %s/kubelb-ccm-kubeconfig and put it in %s", h.Namespace, h.Source),
			"expired %s ago (%s)", now.Sub(exp).Round(time.Second), exp.UTC().Format(time.RFC3339))
	}
	return ok(name, "expires in %s (%s)", exp.Sub(now).Round(time.Minute), exp.UTC().Format(time.RFC3339))
}

// permissionsStep asks the hub whether the token may do what the ccm does (tenant.CCMRules).
func permissionsStep(ctx context.Context, env TenantEnv) Step {
	const name = "hub permissions"
	var missing []string
	checked := 0
	for _, rule := range tenant.CCMRules() {
		for _, res := range rule.Resources {
			for _, verb := range rule.Verbs {
				resource, sub, _ := strings.Cut(res, "/")
				attr := &authorizationv1.ResourceAttributes{Namespace: env.Hub.Namespace, Verb: verb, Group: rule.APIGroups[0], Resource: resource, Subresource: sub}
				if len(rule.ResourceNames) > 0 {
					attr.Name = rule.ResourceNames[0]
				}
				review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attr}}
				got, err := env.HubClientset.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
				if err != nil {
					return failed(name, hubErrorHint(err, env.Hub), "asking the hub: %v", err)
				}
				checked++
				if !got.Status.Allowed {
					missing = append(missing, verb+" "+res)
				}
			}
		}
	}
	if len(missing) > 0 {
		return failed(name, fmt.Sprintf("the platform team checks the Role %s and its RoleBinding in %s (the manager keeps them from the Tenant)", tenant.RoleName, env.Hub.Namespace),
			"missing in %s: %s", env.Hub.Namespace, strings.Join(missing, ", "))
	}
	return ok(name, "all %d rights the ccm needs in %s", checked, env.Hub.Namespace)
}

// leaseStep: the ccm's leader election Lease is held and renewed.
func leaseStep(ctx context.Context, env TenantEnv) Step {
	const name = "ccm lease"
	namespaces := []string{env.CCM.Flag("--leader-election-namespace", "")}
	if namespaces[0] == "" {
		namespaces = []string{"kube-system"}
		if env.CCM != nil {
			namespaces = []string{env.CCM.Namespace, "kube-system"}
		}
	}
	for _, ns := range namespaces {
		l := &coordinationv1.Lease{}
		if err := env.Tenant.Get(ctx, client.ObjectKey{Namespace: ns, Name: ccmLeaseName}, l); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return failed(name, "your tenant kubeconfig needs to read Leases", "reading Lease %s/%s: %v", ns, ccmLeaseName, err)
		}
		holder, renew := "", time.Time{}
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if l.Spec.RenewTime != nil {
			renew = l.Spec.RenewTime.Time
		}
		duration := 15 * time.Second
		if l.Spec.LeaseDurationSeconds != nil {
			duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
		}
		age := max(env.Now.Sub(renew), 0).Round(time.Second) // clocks differ a little
		if holder == "" || age > 2*duration {
			return failed(name, "no ccm holds the lease: the ccm is not running; check its Pods and logs",
				"Lease %s/%s last renewed %s ago by %q", ns, ccmLeaseName, age, holder)
		}
		return ok(name, "Lease %s/%s held by %s, renewed %s ago", ns, ccmLeaseName, holder, age)
	}
	return failed(name, "the ccm is not running (or never won its election): install the kubelb-ccm chart, or check its Pods and logs",
		"no Lease %s in %s", ccmLeaseName, strings.Join(namespaces, ", "))
}

// nodeAddressStep: every node that takes load balancer traffic has an address the ccm sends
// the hub: of its --node-address-type, or of the ccm's fallback type (ccm.NodeAddresses:
// ExternalIP → InternalIP → Hostname, ...), which the step names.
func nodeAddressStep(ctx context.Context, env TenantEnv) Step {
	const name = "node addresses"
	want := env.NodeAddressType
	if want == "" {
		want = env.CCM.Flag("--node-address-type", ccm.NodeAddressExternalIP)
	}
	nodes := &corev1.NodeList{}
	if err := env.Tenant.List(ctx, nodes); err != nil {
		return failed(name, "your tenant kubeconfig needs to list Nodes", "listing Nodes: %v", err)
	}
	if len(nodes.Items) == 0 {
		return failed(name, "the tenant cluster has no Node: the hub has nowhere to send traffic", "no Node")
	}
	var lacking, fellBack []string
	serving := 0
	for _, n := range nodes.Items {
		if !nodeip.NodeServes(&n) {
			continue
		}
		serving++
		addrs, _ := ccm.NodeAddresses([]corev1.Node{n}, want)
		switch {
		case len(addrs) == 0:
			lacking = append(lacking, n.Name)
		case !slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool { return string(a.Type) == want && a.Address != "" }):
			fellBack = append(fellBack, fmt.Sprintf("%s: %s%s", n.Name, addrs[0].IP, addrs[0].Hostname))
		}
	}
	switch {
	case serving == 0:
		return failed(name, "no node is Ready and open to load balancer traffic (node.kubernetes.io/exclude-from-external-load-balancers): the hub has nowhere to send traffic",
			"none of %d nodes serves", len(nodes.Items))
	case len(lacking) > 0:
		return failed(name, "set the ccm's --node-address-type (chart value kubelb.nodeAddressType) to a type your nodes have (`kubectl get nodes -o wide`), one the hub can reach",
			"%d of %d serving nodes have no address the ccm can send: %s", len(lacking), serving, strings.Join(firstN(lacking, 5), ", "))
	case len(fellBack) > 0:
		return ok(name, "%d of %d serving node(s) without an %s address are sent by the ccm's fallback (%s): check that the hub reaches them",
			len(fellBack), serving, want, strings.Join(firstN(fellBack, 5), ", "))
	}
	return ok(name, "all %d serving node(s) have an %s address", serving, want)
}

// gatewayCRDStep: the Gateway API CRDs serve the versions the ccm reads, when it mirrors
// Gateway API objects.
func gatewayCRDStep(ctx context.Context, env TenantEnv) Step {
	const name = "Gateway API CRDs"
	enabled := env.CCM.Flag("--enable-gateway-api", "false") == "true"
	installs := env.CCM.Flag("--install-gateway-api-crds", "false") == "true"
	var missing, found []string
	for _, k := range routekind.Kinds {
		if !k.GatewayAPI() {
			continue
		}
		gvk := k.GroupVersionKind()
		crdName := strings.ToLower(gvk.Kind) + "s." + gvk.Group
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Tenant.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
			if !apierrors.IsNotFound(err) {
				return failed(name, "your tenant kubeconfig needs to read CustomResourceDefinitions", "reading CRD %s: %v", crdName, err)
			}
			missing = append(missing, gvk.Kind)
			continue
		}
		if !slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == gvk.Version && v.Served }) {
			missing = append(missing, gvk.Kind+" "+gvk.Version)
			continue
		}
		found = append(found, fmt.Sprintf("%s %s", gvk.Kind, crd.Annotations["gateway.networking.k8s.io/bundle-version"]))
	}
	switch {
	case !enabled && env.CCM != nil:
		return skipped(name, "the ccm mirrors no Gateway API object (--enable-gateway-api is off); installed: %s", orNone(found))
	case len(missing) == 0:
		return ok(name, "%s", strings.Join(found, ", "))
	case installs:
		return skipped(name, "the ccm installs them at start (--install-gateway-api-crds); missing now: %s", strings.Join(missing, ", "))
	case !enabled:
		return skipped(name, "not installed or not at the versions the ccm reads (%s); needed only with Gateway API on in the ccm", strings.Join(missing, ", "))
	}
	return failed(name, "install the Gateway API standard CRDs the ccm is built for (v1.6), or set the chart value kubelb.installGatewayAPICRDs; kinds whose CRD is missing are not mirrored",
		"missing or not served at the version the ccm reads: %s", strings.Join(missing, ", "))
}

// ingressClassStep: the IngressClass kubelb exists when the ccm mirrors Ingresses by class.
func ingressClassStep(ctx context.Context, env TenantEnv) Step {
	const name = "IngressClass kubelb"
	if env.CCM.Flag("--disable-ingress-controller", "false") == "true" {
		return skipped(name, "the ccm mirrors no Ingress (--disable-ingress-controller)")
	}
	ic := &networkingv1.IngressClass{}
	if err := env.Tenant.Get(ctx, client.ObjectKey{Name: v1alpha1.DefaultClass}, ic); err != nil {
		if apierrors.IsNotFound(err) {
			if env.CCM.Flag("--use-ingress-class", "true") != "true" {
				return skipped(name, "none; the ccm mirrors every Ingress (--use-ingress-class=false)")
			}
			return failed(name, "create the IngressClass kubelb (the kubelb-ccm chart does); Ingresses name it in spec.ingressClassName", "no IngressClass kubelb")
		}
		return failed(name, "your tenant kubeconfig needs to read IngressClasses", "reading IngressClass kubelb: %v", err)
	}
	return ok(name, "controller %s", ic.Spec.Controller)
}

// gatewayClassStep: a GatewayClass of kubelb's controller exists, and is Accepted, when the
// ccm mirrors Gateways.
func gatewayClassStep(ctx context.Context, env TenantEnv) Step {
	const name = "GatewayClass"
	if env.CCM.Flag("--enable-gateway-api", "false") != "true" || env.CCM.Flag("--disable-gateway-controller", "false") == "true" {
		return skipped(name, "the ccm mirrors no Gateway (Gateway API off)")
	}
	list := &gwapiv1.GatewayClassList{}
	if err := env.Tenant.List(ctx, list); err != nil {
		return failed(name, "install the Gateway API CRDs, and let your tenant kubeconfig read GatewayClasses", "listing GatewayClasses: %v", err)
	}
	for _, gc := range list.Items {
		if string(gc.Spec.ControllerName) == source.ControllerName {
			return ok(name, "%s (controller %s)", gc.Name, source.ControllerName)
		}
	}
	return failed(name, fmt.Sprintf("create a GatewayClass kubelb with controllerName %s; Gateways name it in spec.gatewayClassName", source.ControllerName),
		"no GatewayClass with controllerName %s", source.ControllerName)
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
