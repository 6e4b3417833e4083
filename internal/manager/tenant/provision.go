package tenant

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/settings"
	"kubelb.dev/kubelb/internal/ssa"
	"kubelb.dev/kubelb/internal/version"
)

// retryTerminating is how soon a Tenant waiting for an old namespace to go looks again.
const retryTerminating = 5 * time.Second

// retryNoHubServer is how soon a Tenant without a hub server URL looks for cluster-info again.
const retryNoHubServer = 10 * time.Second

// transient turns an API error into a Provisioning outcome; the error is returned as well so
// the request is retried with back-off.
func transient(err error) (outcome, error) {
	return outcome{phase: kubelbv1alpha1.TenantPhaseProvisioning, reason: ReasonProvisioning, message: err.Error()}, err
}

// reconcileNormal makes or repairs everything a live Tenant needs.
func (r *Reconciler) reconcileNormal(ctx context.Context, t *kubelbv1alpha1.Tenant) (o outcome, err error) {
	if o := checkName(t.Name); o != nil {
		return *o, nil
	}
	cfg, _, err := settings.Read(ctx, r.client, r.opts.Namespace, t.Name)
	if err != nil {
		return transient(err)
	}
	r.notYet.Warn(ctrl.LoggerFrom(ctx), cfg, t)
	notYet := settings.NotYet(cfg, t)
	eff := settings.Resolve(cfg, t)
	defer func() { o.notYet, o.settingsRead, o.eff = notYet, true, &eff }()

	if stop, err := r.ensureNamespace(ctx, t); stop != nil || err != nil {
		if err != nil {
			return transient(err)
		}
		return *stop, nil
	}
	// The bounds before the access: a tenant is never without its quota, and its fleet never
	// without its NetworkPolicy.
	quotaRecheck, err := r.ensureResourceQuota(ctx, t.Name, eff.Limits)
	if err != nil {
		return transient(err)
	}
	if err := r.ensureNetworkPolicy(ctx, t.Name); err != nil {
		return transient(err)
	}
	sa, wait, err := r.ensureServiceAccount(ctx, t.Name)
	if err != nil {
		return transient(err)
	}
	if wait != nil {
		return *wait, nil
	}
	if err := r.ensureRole(ctx, t.Name); err != nil {
		return transient(err)
	}
	if err := r.ensureRoleBinding(ctx, t.Name); err != nil {
		return transient(err)
	}
	o, err = r.ensureKubeconfig(ctx, t.Name, sa)
	if err != nil {
		return o, err
	}
	if err := r.ensureTenantState(ctx, t.Name, eff, o); err != nil {
		return transient(err)
	}
	if quotaRecheck > 0 && (o.requeueAfter == 0 || quotaRecheck < o.requeueAfter) {
		o.requeueAfter = quotaRecheck
	}
	return o, nil
}

// checkName refuses Tenant names that give no valid namespace name (a DNS label of at most
// 63 characters, so at most 56 after the "tenant-" prefix, and no dots).
func checkName(name string) *outcome {
	ns := hubnames.TenantNamespace(name)
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return &outcome{
			phase: kubelbv1alpha1.TenantPhaseFailed, reason: ReasonInvalidName, warn: true,
			message: fmt.Sprintf("namespace name %q is invalid: %s; re-create the Tenant with a name of at most 56 lower-case letters, digits and '-'",
				ns, strings.Join(errs, "; ")),
		}
	}
	return nil
}

// ensureNamespace creates or adopts namespace tenant-x. It returns an outcome when the
// namespace cannot be used (yet).
func (r *Reconciler) ensureNamespace(ctx context.Context, t *kubelbv1alpha1.Tenant) (*outcome, error) {
	desired := desiredNamespace(t)
	ns := &corev1.Namespace{}
	err := r.owned.Get(ctx, client.ObjectKeyFromObject(desired), ns)
	if apierrors.IsNotFound(err) {
		// Not kubelb's (yet): look at it directly.
		err = r.apiReader.Get(ctx, client.ObjectKeyFromObject(desired), ns)
		if apierrors.IsNotFound(err) {
			return nil, r.apply(ctx, desired, nil)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("getting namespace %s: %w", desired.Name, err)
	}
	if !ns.DeletionTimestamp.IsZero() {
		return &outcome{
			phase: kubelbv1alpha1.TenantPhaseProvisioning, reason: ReasonNamespaceTerminating,
			message:      fmt.Sprintf("namespace %s of a previous Tenant is still being deleted; provisioning resumes when it is gone", ns.Name),
			requeueAfter: retryTerminating,
		}, nil
	}
	if owner := metav1.GetControllerOf(ns); owner != nil && owner.UID != t.UID {
		return &outcome{
			phase: kubelbv1alpha1.TenantPhaseFailed, reason: ReasonNamespaceConflict, warn: true,
			message: fmt.Sprintf("namespace %s is controlled by %s %s (uid %s); delete it or remove that owner so that Tenant %s can own it",
				ns.Name, owner.Kind, owner.Name, owner.UID, t.Name),
		}, nil
	}
	if metav1.GetControllerOf(ns) != nil && hubnames.HasAll(ns.Labels, desired.Labels) {
		return nil, nil
	}
	// Adopt: kubelb's labels and the Tenant as its controller, next to what others set.
	return nil, r.apply(ctx, desired, ns)
}

// apply applies an object the controller owns under FieldOwner (existing: as it is, or nil).
func (r *Reconciler) apply(ctx context.Context, desired, existing client.Object) error {
	return ssa.Apply(ctx, r.client, desired, existing, FieldOwner, r.legacyManager)
}

// ensureServiceAccount creates the ccm's ServiceAccount, or returns it. A ServiceAccount that
// was deleted (the kubeconfig Secret names its UID) is re-created only once the API server no
// longer accepts its old tokens (see serviceAccountRecreateDelay); until then it returns the
// outcome to report.
func (r *Reconciler) ensureServiceAccount(ctx context.Context, tenant string) (*corev1.ServiceAccount, *outcome, error) {
	desired := desiredServiceAccount(tenant)
	sa := &corev1.ServiceAccount{}
	err := r.owned.Get(ctx, client.ObjectKeyFromObject(desired), sa)
	if apierrors.IsNotFound(err) {
		if wait, err := r.waitBeforeRecreating(ctx, tenant); wait != nil || err != nil {
			return nil, wait, err
		}
		if err := r.apply(ctx, desired, nil); err != nil {
			return nil, nil, err
		}
		r.serviceAccountsGone.Delete(tenant)
		return desired, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("getting ServiceAccount %s/%s: %w", desired.Namespace, desired.Name, err)
	}
	r.serviceAccountsGone.Delete(tenant)
	return sa, nil, nil
}

// waitBeforeRecreating returns an outcome while a deleted ccm ServiceAccount must not be
// re-created yet. Deleting it is how every token of a tenant is revoked, but kube-apiserver
// keeps accepting a token for a while after it authenticated it (its token cache), and the
// ccm may request tokens for its ServiceAccount by name: re-created at once, the new
// ServiceAccount would hand fresh tokens to the holder of a revoked one.
func (r *Reconciler) waitBeforeRecreating(ctx context.Context, tenant string) (*outcome, error) {
	ns := hubnames.TenantNamespace(tenant)
	sec := &corev1.Secret{}
	err := r.owned.Get(ctx, types.NamespacedName{Namespace: ns, Name: kubelbv1alpha1.CCMKubeconfigSecretName}, sec)
	if apierrors.IsNotFound(err) || (err == nil && sec.Annotations[AnnotationServiceAccountUID] == "") {
		return nil, nil // never had one: a new tenant
	}
	if err != nil {
		return nil, fmt.Errorf("getting Secret %s/%s: %w", ns, kubelbv1alpha1.CCMKubeconfigSecretName, err)
	}
	now := r.now()
	seen, _ := r.serviceAccountsGone.LoadOrStore(tenant, now)
	at := seen.(time.Time).Add(serviceAccountRecreateDelay)
	if !now.Before(at) {
		return nil, nil
	}
	return &outcome{
		phase: kubelbv1alpha1.TenantPhaseProvisioning, reason: ReasonServiceAccountRevoked, requeueAfter: at.Sub(now),
		message: fmt.Sprintf("ServiceAccount %s/%s (uid %s) was deleted, which revokes every token of the tenant's ccm; "+
			"it is re-created with a new kubeconfig once the API server no longer accepts the old tokens", ns, ServiceAccountName,
			sec.Annotations[AnnotationServiceAccountUID]),
	}, nil
}

func (r *Reconciler) ensureRole(ctx context.Context, tenant string) error {
	desired := desiredRole(tenant)
	role := &rbacv1.Role{}
	err := r.owned.Get(ctx, client.ObjectKeyFromObject(desired), role)
	if apierrors.IsNotFound(err) {
		return r.apply(ctx, desired, nil)
	}
	if err != nil {
		return fmt.Errorf("getting Role %s/%s: %w", desired.Namespace, desired.Name, err)
	}
	if equality.Semantic.DeepEqual(role.Rules, desired.Rules) && hubnames.HasAll(role.Labels, desired.Labels) {
		return nil
	}
	return r.apply(ctx, desired, role)
}

func (r *Reconciler) ensureRoleBinding(ctx context.Context, tenant string) error {
	desired := desiredRoleBinding(tenant)
	rb := &rbacv1.RoleBinding{}
	err := r.owned.Get(ctx, client.ObjectKeyFromObject(desired), rb)
	if apierrors.IsNotFound(err) {
		return r.apply(ctx, desired, nil)
	}
	if err != nil {
		return fmt.Errorf("getting RoleBinding %s/%s: %w", desired.Namespace, desired.Name, err)
	}
	if rb.RoleRef != desired.RoleRef {
		// roleRef is immutable: replace the binding.
		if err := r.client.Delete(ctx, rb, client.Preconditions{UID: &rb.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replacing RoleBinding %s/%s: %w", desired.Namespace, desired.Name, err)
		}
		return fmt.Errorf("RoleBinding %s/%s had a foreign roleRef and was deleted; it is re-created next", desired.Namespace, desired.Name)
	}
	if equality.Semantic.DeepEqual(rb.Subjects, desired.Subjects) && hubnames.HasAll(rb.Labels, desired.Labels) {
		return nil
	}
	return r.apply(ctx, desired, rb)
}

// ensureNetworkPolicy keeps NetworkPolicy kubelb-envoy of the tenant's Envoy fleet as
// DesiredNetworkPolicy says (an edit is undone), or deletes the one kubelb made when the
// policy is disabled.
func (r *Reconciler) ensureNetworkPolicy(ctx context.Context, tenant string) error {
	ns := hubnames.TenantNamespace(tenant)
	np := &networkingv1.NetworkPolicy{}
	err := r.owned.Get(ctx, types.NamespacedName{Namespace: ns, Name: NetworkPolicyName}, np)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting NetworkPolicy %s/%s: %w", ns, NetworkPolicyName, err)
	}
	exists := err == nil
	if r.opts.NetworkPolicy.Disabled {
		if !exists {
			return nil
		}
		if err := r.client.Delete(ctx, np, client.Preconditions{UID: &np.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting NetworkPolicy %s/%s (disabled): %w", ns, NetworkPolicyName, err)
		}
		return nil
	}
	desired := DesiredNetworkPolicy(tenant, r.opts.Namespace, r.opts.NetworkPolicy)
	if !exists {
		return r.apply(ctx, desired, nil)
	}
	if equality.Semantic.DeepEqual(np.Spec, desired.Spec) && hubnames.HasAll(np.Labels, desired.Labels) {
		return nil
	}
	return r.apply(ctx, desired, np)
}

// quotaRecountAfter is how long the quota controller may leave a resource of ResourceQuota
// kubelb-tenant uncounted before the manager re-creates the quota.
const quotaRecountAfter = 10 * time.Second

// ensureResourceQuota keeps ResourceQuota kubelb-tenant at the tenant's limits. It also
// re-creates a quota that the quota controller (kube-controller-manager) synced without
// counting every resource it limits, which happens when the quota was made before the
// controller's discovery (every 30 s) saw kubelb's CRDs, e.g. a Tenant created right after the
// chart installed them: status.hard is set but status.used lacks
// count/loadbalancers.kubelb.k8c.io, the API server refuses every LoadBalancer create with
// "status unknown for quota", and the controller would count again only at its full resync
// (--resource-quota-sync-period, 5 minutes by default), since no create gets through to
// trigger it. A new quota is counted at once. It returns how soon to look again while the
// quota is not fully counted (0 when it is, or when no quota controller has synced it).
func (r *Reconciler) ensureResourceQuota(ctx context.Context, tenant string, limits settings.Limits) (time.Duration, error) {
	desired := desiredResourceQuota(tenant, limits)
	rq := &corev1.ResourceQuota{}
	err := r.owned.Get(ctx, client.ObjectKeyFromObject(desired), rq)
	if apierrors.IsNotFound(err) {
		return 0, r.apply(ctx, desired, nil)
	}
	if err != nil {
		return 0, fmt.Errorf("getting ResourceQuota %s/%s: %w", desired.Namespace, desired.Name, err)
	}
	if !equality.Semantic.DeepEqual(rq.Spec, desired.Spec) || !hubnames.HasAll(rq.Labels, desired.Labels) {
		return 0, r.apply(ctx, desired, rq)
	}
	uncounted := QuotaUncounted(rq)
	if len(uncounted) == 0 {
		return 0, nil
	}
	if age := r.now().Sub(rq.CreationTimestamp.Time); age < quotaRecountAfter {
		return quotaRecountAfter - age, nil
	}
	ctrl.LoggerFrom(ctx).Info("re-creating the ResourceQuota: the quota controller has not counted some of its resources, and the API server refuses their creation until it does",
		"resourceQuota", client.ObjectKeyFromObject(rq), "uncounted", uncounted)
	if err := r.client.Delete(ctx, rq, client.Preconditions{UID: &rq.UID}); err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("deleting ResourceQuota %s/%s to have it counted: %w", rq.Namespace, rq.Name, err)
	}
	if err := r.apply(ctx, desired, nil); err != nil {
		return 0, err
	}
	return quotaRecountAfter, nil
}

// QuotaUncounted returns the resources of rq's status.hard that its status.used lacks,
// sorted: those the quota controller synced the quota without counting. Nil while the
// controller has not synced the quota (no status.hard).
func QuotaUncounted(rq *corev1.ResourceQuota) []corev1.ResourceName {
	var missing []corev1.ResourceName
	for name := range rq.Status.Hard {
		if _, ok := rq.Status.Used[name]; !ok {
			missing = append(missing, name)
		}
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
	return missing
}

// errNoHubServer: no hub server URL is known.
var errNoHubServer = errors.New("no hub API server URL")

// hubEndpoint returns the API server URL and CA for the ccm kubeconfig: the URL from the
// option, else from kube-public/cluster-info; the CA from cluster-info, else the manager's own.
func (r *Reconciler) hubEndpoint(ctx context.Context) (HubEndpoint, error) {
	var fromClusterInfo *HubEndpoint
	cm := &corev1.ConfigMap{}
	err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: ClusterInfoNamespace, Name: ClusterInfoName}, cm)
	switch {
	case err == nil:
		ep, perr := HubEndpointFromClusterInfo(cm)
		if perr != nil {
			ctrl.LoggerFrom(ctx).Info("ignoring cluster-info", "reason", perr.Error())
		} else {
			fromClusterInfo = &ep
		}
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		// Not published (or not readable): only the option can help.
	default:
		return HubEndpoint{}, fmt.Errorf("getting %s/%s: %w", ClusterInfoNamespace, ClusterInfoName, err)
	}
	switch {
	case r.opts.HubAPIServerURL != "":
		ep := HubEndpoint{Server: r.opts.HubAPIServerURL, CAData: r.caData}
		if fromClusterInfo != nil && len(fromClusterInfo.CAData) > 0 {
			ep.CAData = fromClusterInfo.CAData
		}
		return ep, nil
	case fromClusterInfo != nil:
		if len(fromClusterInfo.CAData) == 0 {
			fromClusterInfo.CAData = r.caData
		}
		return *fromClusterInfo, nil
	}
	return HubEndpoint{}, errNoHubServer
}

// ensureKubeconfig keeps Secret kubelb-ccm-kubeconfig valid: the current hub endpoint and a
// token that is replaced after 80% of its lifetime (or at once when the ServiceAccount was
// re-created). It returns the Ready outcome with the time until the next refresh.
func (r *Reconciler) ensureKubeconfig(ctx context.Context, tenant string, sa *corev1.ServiceAccount) (outcome, error) {
	ns := hubnames.TenantNamespace(tenant)
	hub, err := r.hubEndpoint(ctx)
	if errors.Is(err, errNoHubServer) {
		return outcome{
			phase: kubelbv1alpha1.TenantPhaseFailed, reason: ReasonNoHubServerURL, warn: true, requeueAfter: retryNoHubServer,
			message: fmt.Sprintf("cannot write Secret %s: the hub API server URL is unknown; start the manager with --tenant-kubeconfig-server or publish %s/%s",
				kubelbv1alpha1.CCMKubeconfigSecretName, ClusterInfoNamespace, ClusterInfoName),
		}, nil
	}
	if err != nil {
		return transient(err)
	}

	existing := &corev1.Secret{}
	err = r.owned.Get(ctx, types.NamespacedName{Namespace: ns, Name: kubelbv1alpha1.CCMKubeconfigSecretName}, existing)
	if apierrors.IsNotFound(err) {
		existing = nil
	} else if err != nil {
		return transient(fmt.Errorf("getting Secret %s/%s: %w", ns, kubelbv1alpha1.CCMKubeconfigSecretName, err))
	}

	now := r.now()
	var token string
	life, ok := tokenLifetime{}, false
	if existing != nil {
		life, ok = lifetimeFromAnnotations(existing.Annotations)
		if ok && existing.Annotations[AnnotationServiceAccountUID] == string(sa.UID) && RefreshIn(now, life.IssuedAt, life.ExpiresAt) > 0 {
			token = kubeconfigToken(existing.Data[kubelbv1alpha1.CCMKubeconfigSecretKey])
		}
	}
	if token == "" {
		tr, err := r.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, ServiceAccountName, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(r.opts.TokenTTL / time.Second))},
		}, metav1.CreateOptions{})
		if err != nil {
			return outcome{
				phase: kubelbv1alpha1.TenantPhaseProvisioning, reason: ReasonTokenRequestFailed, warn: true,
				message: fmt.Sprintf("requesting a token for ServiceAccount %s/%s: %v", ns, ServiceAccountName, err),
			}, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", ns, ServiceAccountName, err)
		}
		token = tr.Status.Token
		life = tokenLifetime{IssuedAt: now.Truncate(time.Second), ExpiresAt: tr.Status.ExpirationTimestamp.Time}
	}

	if err := r.ensureTokenAudiences(ctx, ns, token); err != nil {
		return transient(err)
	}
	kubeconfig, err := RenderKubeconfig(hub, ns, token)
	if err != nil {
		return transient(err)
	}
	ann := life.annotations()
	ann[AnnotationServiceAccountUID] = string(sa.UID)
	desired := desiredKubeconfigSecret(tenant, kubeconfig, ann)
	if existing == nil {
		if err := r.apply(ctx, desired, nil); err != nil {
			return transient(err)
		}
	} else if existing.Type != desired.Type {
		// type is immutable: replace the Secret.
		if err := r.client.Delete(ctx, existing, client.Preconditions{UID: &existing.UID}); client.IgnoreNotFound(err) != nil {
			return transient(fmt.Errorf("replacing Secret %s/%s: %w", ns, desired.Name, err))
		}
		return transient(fmt.Errorf("secret %s/%s had type %s and was deleted; it is re-created next", ns, desired.Name, existing.Type))
	} else if !bytes.Equal(existing.Data[kubelbv1alpha1.CCMKubeconfigSecretKey], kubeconfig) ||
		!hubnames.HasAll(existing.Annotations, ann) || !hubnames.HasAll(existing.Labels, desired.Labels) {
		if err := r.apply(ctx, desired, existing); err != nil {
			return transient(err)
		}
	}

	refresh := max(RefreshIn(now, life.IssuedAt, life.ExpiresAt), time.Second)
	return outcome{
		phase: kubelbv1alpha1.TenantPhaseReady, reason: ReasonProvisioned, requeueAfter: refresh,
		message: fmt.Sprintf("namespace %s, RBAC and Secret %s are in place; the ccm token expires at %s and is replaced after %s",
			ns, kubelbv1alpha1.CCMKubeconfigSecretName, life.ExpiresAt.UTC().Format(time.RFC3339),
			RefreshAt(life.IssuedAt, life.ExpiresAt).UTC().Format(time.RFC3339)),
	}, nil
}

// ensureTenantState keeps TenantState "default" up to date for the tenant's ccm.
func (r *Reconciler) ensureTenantState(ctx context.Context, tenant string, eff settings.Tenant, o outcome) error {
	ns := hubnames.TenantNamespace(tenant)
	ts := &kubelbv1alpha1.TenantState{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: hubnames.TenantStateName}, ts)
	if apierrors.IsNotFound(err) {
		ts = &kubelbv1alpha1.TenantState{ObjectMeta: metav1.ObjectMeta{Name: hubnames.TenantStateName, Namespace: ns, Labels: hubnames.TenantLabels(tenant)}}
		if err := r.apply(ctx, ts, nil); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("getting TenantState %s/%s: %w", ns, hubnames.TenantStateName, err)
	}
	next := desiredTenantStateStatus(ts.Status, ts.Generation, version.Get(), eff,
		o.ready(), o.reason, tenantStateMessage(o, eff), r.metaNow())
	if equality.Semantic.DeepEqual(ts.Status, next) {
		return nil
	}
	return ssa.ApplyStatus(ctx, r.client, ts, FieldOwner, &next)
}

// tenantStateMessage is what the ccm is told; it leaves out the token times (which change
// with every refresh) so the TenantState does not change with them.
func tenantStateMessage(o outcome, eff settings.Tenant) string {
	if !o.ready() {
		return o.message
	}
	if eff.DisableLoadBalancer {
		return "the hub serves this tenant; layer-4 load balancing is disabled"
	}
	return "the hub serves this tenant"
}
