// Package checkhub is `kubectl kubelb check hub`: with a platform team's hub kubeconfig, it
// checks what the manager and the tenants' Envoy fleets need to serve — the manager's
// replicas, version and leader, kubelb's CRDs, the xDS CA, each tenant and its fleet, the
// configurations Envoy rejected, hub Services waiting for an address, listener ports left and
// settings accepted but not implemented yet — one line per check, with a hint on each failure.
package checkhub

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/settings"
)

// Options of the checks.
type Options struct {
	// ManagerNamespace is the namespace the manager runs in (its Deployment, Lease, Config
	// "default" and xDS CA Secret).
	ManagerNamespace string
	// Now is the time expiries are measured from.
	Now time.Time
}

// hub is what the checks read once and share.
type hub struct {
	c       client.Client
	o       Options
	manager *appsv1.Deployment // nil: not found
	args    []string           // the manager container's command and args
	tenants []kubelbv1alpha1.Tenant
}

// Run runs every check against the hub c reads, in a fixed order.
func Run(ctx context.Context, c client.Client, o Options) []Check {
	h := &hub{c: c, o: o}
	// One request first, so an unreachable hub is one line and not one per check.
	err := c.Get(ctx, client.ObjectKey{Name: o.ManagerNamespace}, &corev1.Namespace{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		return []Check{{Name: "hub", Status: Fail, Detail: err.Error(),
			Hint: "check that the hub's API server is reachable with this kubeconfig: kubectl --kubeconfig ... get --raw /readyz"}}
	}
	checks := []Check{h.checkManager(ctx), h.checkVersion(ctx), h.checkLeader(ctx), checkCRDs(ctx, c), h.checkCA(ctx)}
	tenants := &kubelbv1alpha1.TenantList{}
	if err := c.List(ctx, tenants); err != nil {
		return append(checks, readFailed("tenants", "Tenants", err))
	}
	h.tenants = tenants.Items
	sort.Slice(h.tenants, func(i, j int) bool { return h.tenants[i].Name < h.tenants[j].Name })
	if len(h.tenants) == 0 {
		checks = append(checks, Check{Name: "tenants", Status: Warn, Detail: "no Tenant yet",
			Hint: "onboard one: kubectl kubelb tenant onboard <name> --tenant-context <its cluster>"})
	}
	for i := range h.tenants {
		checks = append(checks, h.checkTenant(ctx, &h.tenants[i]))
	}
	checks = append(checks, Check{Name: "xDS connections", Status: Skip,
		Detail: "the hub publishes them only as manager metrics (kubelb_xds_*), which this command does not scrape"})
	checks = append(checks, h.checkRejections(ctx))
	checks = append(checks, h.checkAddresses(ctx)...)
	checks = append(checks, h.checkPorts(ctx), h.checkNotYet(ctx))
	return checks
}

// readFailed is the failed check of a read the user's credentials or the hub refused.
func readFailed(name, what string, err error) Check {
	hint := "check that the hub is reachable with this kubeconfig"
	if apierrors.IsForbidden(err) {
		hint = "this kubeconfig may not read " + what + ": check hub needs a platform admin's hub kubeconfig"
	}
	return Check{Name: name, Status: Fail, Detail: "reading " + what + ": " + err.Error(), Hint: hint}
}

// findManager returns the Deployment in the manager namespace with a container named
// "manager" (the chart's), and that container's command and args.
func (h *hub) findManager(ctx context.Context) error {
	list := &appsv1.DeploymentList{}
	if err := h.c.List(ctx, list, client.InNamespace(h.o.ManagerNamespace)); err != nil {
		return err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for i := range list.Items {
		for _, ctr := range list.Items[i].Spec.Template.Spec.Containers {
			if ctr.Name == "manager" {
				h.manager = &list.Items[i]
				h.args = append(append([]string{}, ctr.Command...), ctr.Args...)
				return nil
			}
		}
	}
	return nil
}

func (h *hub) checkManager(ctx context.Context) Check {
	const name = "manager"
	if err := h.findManager(ctx); err != nil {
		return readFailed(name, "Deployments in namespace "+h.o.ManagerNamespace, err)
	}
	d := h.manager
	if d == nil {
		return Check{Name: name, Status: Fail, Detail: "no Deployment with a container \"manager\" in namespace " + h.o.ManagerNamespace,
			Hint: "install the kubelb-manager chart, or pass --manager-namespace with the namespace it runs in"}
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	detail := fmt.Sprintf("%s/%s: %d of %d replicas ready", d.Namespace, d.Name, d.Status.ReadyReplicas, want)
	if want == 0 || d.Status.ReadyReplicas < want {
		return Check{Name: name, Status: Fail, Detail: detail,
			Hint: fmt.Sprintf("kubectl -n %s describe deployment %s; kubectl -n %s get pods", d.Namespace, d.Name, d.Namespace)}
	}
	return Check{Name: name, Status: Pass, Detail: detail}
}

// flagValue is the value of --name in args ("--name=v" or "--name v").
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

func (h *hub) checkVersion(ctx context.Context) Check {
	const name = "version"
	var parts []string
	cfg := &kubelbv1alpha1.Config{}
	err := h.c.Get(ctx, client.ObjectKey{Namespace: h.o.ManagerNamespace, Name: kubelbv1alpha1.DefaultConfigName}, cfg)
	if client.IgnoreNotFound(err) != nil {
		return readFailed(name, "Config "+kubelbv1alpha1.DefaultConfigName, err)
	}
	reported := cfg.Status.Version.GitVersion
	states := &kubelbv1alpha1.TenantStateList{}
	if err := h.c.List(ctx, states); err != nil {
		return readFailed(name, "TenantStates", err)
	}
	versions := map[string]bool{}
	for _, s := range states.Items {
		if v := s.Status.Version.GitVersion; v != "" {
			versions[v] = true
		}
	}
	if reported == "" && len(versions) == 1 {
		for v := range versions {
			reported = v
		}
	}
	if reported != "" {
		parts = append(parts, "the manager reports "+reported)
	}
	if h.manager != nil {
		for _, ctr := range h.manager.Spec.Template.Spec.Containers {
			if ctr.Name == "manager" {
				parts = append(parts, "image "+ctr.Image)
			}
		}
	}
	if len(parts) == 0 {
		return Check{Name: name, Status: Warn, Detail: "the manager has reported no version yet (Config and TenantStates have none)",
			Hint: "the manager writes its version when it reconciles: is it running? (see manager above)"}
	}
	if len(versions) > 1 {
		return Check{Name: name, Status: Warn, Detail: strings.Join(parts, ", ") + "; TenantStates carry " + strings.Join(slices.Sorted(maps.Keys(versions)), ", "),
			Hint: "an upgrade is under way or a replica of another version runs: kubectl -n " + h.o.ManagerNamespace + " get pods -o wide"}
	}
	return Check{Name: name, Status: Pass, Detail: strings.Join(parts, ", ")}
}

// tenantNamespaces are the hub namespaces of the Tenants.
func (h *hub) tenantNamespaces() map[string]bool {
	out := map[string]bool{}
	for _, t := range h.tenants {
		out[hubnames.TenantNamespace(t.Name)] = true
	}
	return out
}

func (h *hub) checkTenant(ctx context.Context, t *kubelbv1alpha1.Tenant) Check {
	name := "tenant " + t.Name
	ns := hubnames.TenantNamespace(t.Name)
	ready := meta.FindStatusCondition(t.Status.Conditions, "Ready")
	if ready == nil || ready.Status != "True" {
		detail := "not Ready yet (phase " + orNone(t.Status.Phase) + ")"
		if ready != nil {
			detail = fmt.Sprintf("phase %s, %s: %s", orNone(t.Status.Phase), ready.Reason, ready.Message)
		}
		return Check{Name: name, Status: Fail, Detail: detail,
			Hint: "kubectl describe tenant " + t.Name + " (the reasons are in docs/tenants.md); the manager's leader logs say more"}
	}
	list := &appsv1.DeploymentList{}
	if err := h.c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return readFailed(name, "Deployments in "+ns, err)
	}
	var fleets []string
	var want, got int32
	for _, d := range list.Items {
		if !hubnames.HasAll(d.Spec.Template.Labels, hubnames.EnvoyPodLabels(ns)) {
			continue
		}
		fleets = append(fleets, d.Name)
		if d.Spec.Replicas != nil {
			want += *d.Spec.Replicas
		} else {
			want++
		}
		got += d.Status.ReadyReplicas
	}
	sort.Strings(fleets)
	if len(fleets) == 0 {
		return Check{Name: name, Status: Pass, Detail: "Ready; no Envoy fleet yet (it comes with the tenant's first LoadBalancer or Route)"}
	}
	detail := fmt.Sprintf("Ready; Envoy fleet %s: %d of %d ready", strings.Join(fleets, ", "), got, want)
	if got < want || want == 0 {
		return Check{Name: name, Status: Fail, Detail: detail,
			Hint: fmt.Sprintf("kubectl -n %s describe deployment %s; kubectl -n %s get pods -l %s=%s", ns, fleets[0], ns, hubnames.LabelAppName, hubnames.EnvoyAppName)}
	}
	return Check{Name: name, Status: Pass, Detail: detail}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func (h *hub) checkRejections(ctx context.Context) Check {
	const name = "rejected configurations"
	states := &kubelbv1alpha1.TenantStateList{}
	if err := h.c.List(ctx, states); err != nil {
		return readFailed(name, "TenantStates", err)
	}
	var lines, namespaces []string
	for _, s := range states.Items {
		for _, r := range s.Status.Rejections {
			typ := r.TypeURL[strings.LastIndex(r.TypeURL, ".")+1:]
			lines = append(lines, fmt.Sprintf("%s: %s rejected %s (%s)", s.Namespace, r.Proxy, typ, firstLine(r.Message)))
		}
		if len(s.Status.Rejections) > 0 {
			namespaces = append(namespaces, s.Namespace)
		}
	}
	if len(lines) == 0 {
		return Check{Name: name, Status: Pass, Detail: "no Envoy proxy rejected its configuration"}
	}
	sort.Strings(lines)
	sort.Strings(namespaces)
	return Check{Name: name, Status: Fail, Detail: strings.Join(lines, "; "),
		Hint: fmt.Sprintf("the objects whose resources were rejected carry a condition saying so: kubectl -n %s get loadbalancers,routes; the whole rejection: kubectl -n %s get tenantstate default -o yaml",
			namespaces[0], namespaces[0])}
}

// firstLine is s up to its first line break, at most 120 characters.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > 120 {
		s = string(r[:119]) + "…"
	}
	return s
}

func (h *hub) checkNotYet(ctx context.Context) Check {
	const name = "settings not implemented yet"
	cfg := &kubelbv1alpha1.Config{}
	err := h.c.Get(ctx, client.ObjectKey{Namespace: h.o.ManagerNamespace, Name: kubelbv1alpha1.DefaultConfigName}, cfg)
	if apierrors.IsNotFound(err) {
		cfg = nil
	} else if err != nil {
		return readFailed(name, "Config "+kubelbv1alpha1.DefaultConfigName, err)
	}
	fields := settings.NotYet(cfg, nil)
	for i := range h.tenants {
		for _, f := range settings.NotYet(nil, &h.tenants[i]) {
			fields = append(fields, strings.Replace(f, "Tenant ", "Tenant "+h.tenants[i].Name+" ", 1))
		}
	}
	if len(fields) == 0 {
		return Check{Name: name, Status: Pass, Detail: "none in use"}
	}
	return Check{Name: name, Status: Warn, Detail: "set but ignored: " + strings.Join(fields, ", "),
		Hint: "these settings are accepted but do nothing yet; remove them, or expect no effect from them"}
}

// waitingFor is the display of a loadBalancerClass.
func classLabel(class string) string {
	if class == "" {
		return "without a loadBalancerClass"
	}
	return "of class " + class
}

// serviceClass is the Service's loadBalancerClass, "" for none.
func serviceClass(s *corev1.Service) string {
	if s.Spec.LoadBalancerClass == nil {
		return ""
	}
	return *s.Spec.LoadBalancerClass
}
