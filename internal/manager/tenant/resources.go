package tenant

import (
	"fmt"
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/manager/envoyfleet"
	"kubelb.dev/kubelb/internal/settings"
)

// CCMRules are everything a tenant's ccm may do on the hub, granted by a Role in its own
// namespace only: mirror LoadBalancers, Routes, Addresses and SyncSecrets (and read the
// status the manager writes, which comes with the objects), read its TenantState, and renew
// its own token (TokenRequest for its own ServiceAccount only, so a ccm keeps working without
// its kubeconfig being copied again). No status subresource at all: hub status is the
// manager's record (allocated listener ports, conditions, the addresses the ccm copies back)
// and a tenant that could write it could forge it. No core Services or Secrets, no Events
// (the ccm reports on its own cluster's objects), no token for any other ServiceAccount,
// nothing cluster-scoped.
func CCMRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{
			APIGroups: []string{kubelbv1alpha1.GroupVersion.Group},
			Resources: []string{"loadbalancers", "routes", "addresses", "syncsecrets"},
			Verbs:     []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		},
		{
			APIGroups: []string{kubelbv1alpha1.GroupVersion.Group},
			Resources: []string{"tenantstates"},
			Verbs:     []string{"get", "list", "watch"},
		},
		{
			APIGroups:     []string{corev1.GroupName},
			Resources:     []string{"serviceaccounts/token"},
			ResourceNames: []string{ServiceAccountName},
			Verbs:         []string{"create"},
		},
	}
}

// accessLabels are on the ccm access objects (ServiceAccount, Role, RoleBinding, Secret).
func accessLabels(tenant string) map[string]string {
	l := hubnames.TenantLabels(tenant)
	l[hubnames.LabelAppName] = AppName
	return l
}

// ownerRef makes the Tenant the controller of its namespace.
func ownerRef(t *kubelbv1alpha1.Tenant) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         kubelbv1alpha1.GroupVersion.String(),
		Kind:               "Tenant",
		Name:               t.Name,
		UID:                t.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

func desiredNamespace(t *kubelbv1alpha1.Tenant) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:            hubnames.TenantNamespace(t.Name),
		Labels:          hubnames.TenantLabels(t.Name),
		OwnerReferences: []metav1.OwnerReference{ownerRef(t)},
	}}
}

func desiredServiceAccount(tenant string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Name: ServiceAccountName, Namespace: hubnames.TenantNamespace(tenant), Labels: accessLabels(tenant),
	}}
}

func desiredRole(tenant string) *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: RoleName, Namespace: hubnames.TenantNamespace(tenant), Labels: accessLabels(tenant)},
		Rules:      CCMRules(),
	}
}

func desiredRoleBinding(tenant string) *rbacv1.RoleBinding {
	ns := hubnames.TenantNamespace(tenant)
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: RoleBindingName, Namespace: ns, Labels: accessLabels(tenant)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: RoleName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccountName, Namespace: ns}},
	}
}

func desiredKubeconfigSecret(tenant string, kubeconfig []byte, annotations map[string]string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:        kubelbv1alpha1.CCMKubeconfigSecretName,
			Namespace:   hubnames.TenantNamespace(tenant),
			Labels:      accessLabels(tenant),
			Annotations: annotations,
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{kubelbv1alpha1.CCMKubeconfigSecretKey: kubeconfig},
	}
}

// DesiredNetworkPolicy is the NetworkPolicy of the tenant's Envoy fleet: it selects the Envoy
// pods (hubnames.EnvoyPodLabels) and restricts their egress only (ingress stays as it is) to
//   - the tenant node addresses: each of o.EgressCIDRs, minus the o.ExceptCIDRs it strictly
//     contains (the API server refuses an except outside its cidr);
//   - the manager pods (o.ManagerPodLabels in managerNS) on TCP o.XDSPort;
//   - the cluster DNS (o.DNSPodLabels in o.DNSNamespace) on UDP and TCP 53, when set.
//
// o has its defaults and valid CIDRs (checkNetworkPolicyOptions).
func DesiredNetworkPolicy(tenant, managerNS string, o NetworkPolicyOptions) *networkingv1.NetworkPolicy {
	ns := hubnames.TenantNamespace(tenant)
	nodes := networkingv1.NetworkPolicyEgressRule{}
	for _, c := range o.EgressCIDRs {
		cidr := netip.MustParsePrefix(c).Masked()
		block := &networkingv1.IPBlock{CIDR: cidr.String()}
		for _, e := range o.ExceptCIDRs {
			ex := netip.MustParsePrefix(e).Masked()
			if ex.Addr().Is4() == cidr.Addr().Is4() && ex.Bits() > cidr.Bits() && cidr.Contains(ex.Addr()) {
				block.Except = append(block.Except, ex.String())
			}
		}
		nodes.To = append(nodes.To, networkingv1.NetworkPolicyPeer{IPBlock: block})
	}
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	xds := networkingv1.NetworkPolicyEgressRule{
		To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: managerNS}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: o.ManagerPodLabels},
		}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(o.XDSPort))}},
	}
	// The tenant's own rate-limit service (envoyfleet.BuildRateLimit, when the platform team
	// configures a store): Envoy asks it about every request under a global limit, and a
	// blocked service would let every such request through (the filter fails open).
	rateLimit := networkingv1.NetworkPolicyEgressRule{
		To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: envoyfleet.RateLimitPodLabels(ns)}}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(envoyfleet.RateLimitGRPCPort))}},
	}
	egress := []networkingv1.NetworkPolicyEgressRule{nodes, xds, rateLimit}
	if o.DNSNamespace != "" {
		dns := intstr.FromInt32(53)
		egress = append(egress, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: o.DNSNamespace}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: o.DNSPodLabels},
			}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}},
		})
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: NetworkPolicyName, Namespace: ns, Labels: hubnames.TenantLabels(tenant)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: hubnames.EnvoyPodLabels(ns)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      egress,
		},
	}
}

// checkNetworkPolicyOptions refuses CIDRs that are not CIDRs.
func checkNetworkPolicyOptions(o NetworkPolicyOptions) error {
	for _, list := range []struct {
		what  string
		cidrs []string
	}{{"egress", o.EgressCIDRs}, {"except", o.ExceptCIDRs}} {
		for _, c := range list.cidrs {
			if _, err := netip.ParsePrefix(c); err != nil {
				return fmt.Errorf("tenant controller: NetworkPolicy %s CIDR %q: %w", list.what, c, err)
			}
		}
	}
	if len(o.EgressCIDRs) == 0 {
		return fmt.Errorf("tenant controller: the NetworkPolicy needs at least one egress CIDR")
	}
	if o.XDSPort < 1 || o.XDSPort > 65535 {
		return fmt.Errorf("tenant controller: xDS port %d is not a port", o.XDSPort)
	}
	return nil
}

// Resources the ResourceQuota counts: kubelb's objects a tenant writes, by the API server's
// object count quota (count/<resource>.<group>).
var (
	QuotaLoadBalancers = corev1.ResourceName("count/loadbalancers." + kubelbv1alpha1.GroupVersion.Group)
	QuotaRoutes        = corev1.ResourceName("count/routes." + kubelbv1alpha1.GroupVersion.Group)
	QuotaSyncSecrets   = corev1.ResourceName("count/syncsecrets." + kubelbv1alpha1.GroupVersion.Group)
	QuotaAddresses     = corev1.ResourceName("count/addresses." + kubelbv1alpha1.GroupVersion.Group)
)

// desiredResourceQuota bounds the number of LoadBalancers, Routes, SyncSecrets and Addresses
// the tenant's namespace may hold, at the tenant's resolved limits: the API server refuses
// one more ("exceeded quota"), whatever writes it, where the quota controller runs. (The
// byte limits have no ResourceQuota form; the manager enforces them, and the counts, itself.)
func desiredResourceQuota(tenant string, limits settings.Limits) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: ResourceQuotaName, Namespace: hubnames.TenantNamespace(tenant), Labels: hubnames.TenantLabels(tenant)},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			QuotaLoadBalancers: resource.MustParse(strconv.Itoa(limits.LoadBalancers)),
			QuotaRoutes:        resource.MustParse(strconv.Itoa(limits.Routes)),
			QuotaSyncSecrets:   resource.MustParse(strconv.Itoa(limits.SyncSecrets)),
			QuotaAddresses:     resource.MustParse(strconv.Itoa(limits.Addresses)),
		}},
	}
}

// TenantState condition type and reasons.
const (
	// TenantStateReady says whether the hub serves the tenant.
	TenantStateReady = "Ready"
)

// desiredTenantStateStatus computes the TenantState status from the previous one: what eff
// disables (loadBalancer.disable; the Layer 7 conditions, layer7Condition), the bounds on its
// traffic policies (trafficPolicies, which the ccm checks the tenant's policies against) and
// Ready.
// lastUpdated moves only when something else changed, so an unchanged tenant causes no writes.
func desiredTenantStateStatus(prev kubelbv1alpha1.TenantStateStatus, generation int64, version kubelbv1alpha1.Version,
	eff settings.Tenant, ready bool, reason, message string, now metav1.Time) kubelbv1alpha1.TenantStateStatus {
	next := *prev.DeepCopy()
	next.Version = version
	next.LoadBalancer.Disable = eff.DisableLoadBalancer
	next.TrafficPolicies = eff.TrafficPolicies.DeepCopy()
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&next.Conditions, metav1.Condition{
		Type: TenantStateReady, Status: status, Reason: reason, Message: message,
		ObservedGeneration: generation, LastTransitionTime: now,
	})
	meta.SetStatusCondition(&next.Conditions, layer7Condition(kubelbv1alpha1.TenantStateConditionIngress, "Ingresses", "ingress.disable", eff.DisableIngress, generation, now))
	meta.SetStatusCondition(&next.Conditions, layer7Condition(kubelbv1alpha1.TenantStateConditionGatewayAPI, "Gateway API objects", "gatewayAPI.disable", eff.DisableGatewayAPI, generation, now))
	if tenantStateChanged(prev, next) || prev.LastUpdated.IsZero() {
		next.LastUpdated = now
	}
	return next
}

// layer7Condition tells the ccm whether the hub serves the tenant's objects of one kind
// (what: "Ingresses"; field: the setting that disables them).
func layer7Condition(typ, what, field string, disabled bool, generation int64, now metav1.Time) metav1.Condition {
	c := metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: kubelbv1alpha1.TenantStateReasonAllowed,
		Message: "The hub serves the tenant's " + what + ".", ObservedGeneration: generation, LastTransitionTime: now}
	if disabled {
		c.Status, c.Reason = metav1.ConditionFalse, kubelbv1alpha1.TenantStateReasonDisabled
		c.Message = "The hub's platform team disabled " + what + " for this tenant (" + field + " on the Tenant or the Config); they are not served."
	}
	return c
}

func tenantStateChanged(a, b kubelbv1alpha1.TenantStateStatus) bool {
	a.LastUpdated, b.LastUpdated = metav1.Time{}, metav1.Time{}
	return !equality.Semantic.DeepEqual(a, b)
}
