// Package sysdump is `kubectl kubelb sysdump`: one tar.gz of what a bug report about the hub
// needs — kubelb's objects of every kind (all namespaces), the Services, Deployments, Pods and
// Events of the manager's and the tenants' namespaces, the Secrets' metadata (never their
// data), the manager pods' logs (leader and standbys) and, with --envoy, each tenant fleet's
// Envoy config dump, clusters and stats.
package sysdump

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/cli/envoyadmin"
	"kubelb.dev/kubelb/internal/envoyclusters"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/process"
)

// Options of a sysdump.
type Options struct {
	// ManagerNamespace is the manager's namespace; ManagerSelector selects its pods.
	ManagerNamespace, ManagerSelector string
	// LeaseName is the manager's leader-election Lease in ManagerNamespace.
	LeaseName string
	// Tail is the number of log lines of each manager container (0: all).
	Tail int64
	// Envoy adds each tenant fleet's Envoy config dump, clusters and stats.
	Envoy bool
}

// redacted replaces the values of secret data.
const redacted = "REDACTED"

// lastApplied is kubectl's annotation holding the whole applied object: data included.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Collect reads the hub of cfg into an archive. What cannot be read is recorded in the
// archive's errors; an error is returned only when the hub cannot be reached at all.
func Collect(ctx context.Context, cfg *rest.Config, o Options, progress io.Writer) (*Archive, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the hub: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: process.Scheme()})
	if err != nil {
		return nil, err
	}
	a := &Archive{}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reaching the hub's API server: %w", err)
	}
	a.Add("version.txt", []byte(fmt.Sprintf("hub Kubernetes %s\n", v.GitVersion)))

	n := kubelbObjects(ctx, cs, dyn, a)
	fmt.Fprintf(progress, "✓ kubelb objects: %d\n", n)

	namespaces, err := kubelbNamespaces(ctx, cs, o.ManagerNamespace)
	if err != nil {
		return nil, err
	}
	for _, ns := range namespaces {
		namespaceObjects(ctx, cs, meta, ns, a)
	}
	fmt.Fprintf(progress, "✓ namespaces: %s\n", strings.Join(namespaces, ", "))

	logs := managerLogs(ctx, cs, o, a)
	fmt.Fprintf(progress, "✓ manager logs: %d pods\n", logs)

	if o.Envoy {
		for _, ns := range namespaces {
			if ns != o.ManagerNamespace {
				envoyDump(ctx, cfg, c, ns, a)
			}
		}
		fmt.Fprintln(progress, "✓ Envoy config dumps")
	}
	return a, nil
}

// kubelbObjects adds every object of every kind of kubelb's API group, all namespaces, one
// file per kind; SyncSecrets without their data. It returns the number of objects.
func kubelbObjects(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, a *Archive) int {
	gv := v1alpha1.GroupVersion
	rl, err := cs.Discovery().ServerResourcesForGroupVersion(gv.String())
	if err != nil {
		a.Failed("discovering kubelb's kinds (are its CRDs installed?): %v", err)
		return 0
	}
	n := 0
	for _, r := range rl.APIResources {
		if strings.Contains(r.Name, "/") {
			continue // a subresource
		}
		list, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{})
		if err != nil {
			a.Failed("listing %s: %v", r.Name, err)
			continue
		}
		for i := range list.Items {
			scrub(&list.Items[i])
		}
		n += len(list.Items)
		addYAML(a, "kubelb/"+r.Name+".yaml", list)
	}
	return n
}

// scrub drops what a sysdump must not hold or need not: secret data (SyncSecrets), kubectl's
// last-applied annotation (it holds the whole object), managed fields.
func scrub(u *unstructured.Unstructured) {
	u.SetManagedFields(nil)
	if ann := u.GetAnnotations(); ann[lastApplied] != "" {
		delete(ann, lastApplied)
		u.SetAnnotations(ann)
	}
	if u.GetKind() == "SyncSecret" {
		for _, field := range []string{"data", "stringData"} {
			if m, ok := u.Object[field].(map[string]any); ok {
				for k := range m {
					m[k] = redacted
				}
			}
		}
	}
}

// kubelbNamespaces are the manager's namespace and the tenants' (labelled managed-by kubelb,
// or named tenant-*), sorted.
func kubelbNamespaces(ctx context.Context, cs kubernetes.Interface, managerNamespace string) ([]string, error) {
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the hub's namespaces: %w", err)
	}
	var out []string
	for _, ns := range list.Items {
		if ns.Name == managerNamespace || hubnames.IsTenantNamespace(ns.Name) ||
			ns.Labels[v1alpha1.LabelManagedBy] == v1alpha1.LabelManagedByValue {
			out = append(out, ns.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// namespaceObjects adds the Services, Deployments, Pods and Events of a namespace and its
// Secrets' metadata (read as metadata only: their data never leaves the API server).
func namespaceObjects(ctx context.Context, cs kubernetes.Interface, meta metadata.Interface, ns string, a *Archive) {
	dir := "namespaces/" + ns + "/"
	add := func(what string, list any, err error) {
		if err != nil {
			a.Failed("listing the %s of %s: %v", what, ns, err)
			return
		}
		addYAML(a, dir+what+".yaml", list)
	}
	opts := metav1.ListOptions{}
	svcs, err := cs.CoreV1().Services(ns).List(ctx, opts)
	add("services", svcs, err)
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, opts)
	add("deployments", deps, err)
	pods, err := cs.CoreV1().Pods(ns).List(ctx, opts)
	add("pods", pods, err)
	events, err := cs.CoreV1().Events(ns).List(ctx, opts)
	add("events", events, err)
	secrets, err := meta.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(ns).List(ctx, opts)
	if err == nil {
		for i := range secrets.Items {
			s := &secrets.Items[i]
			s.ManagedFields = nil
			delete(s.Annotations, lastApplied)
		}
	}
	add("secrets-metadata", secrets, err)
}

// managerLogs adds the logs of the manager pods' containers (the leader's named so), and
// returns the number of pods.
func managerLogs(ctx context.Context, cs kubernetes.Interface, o Options, a *Archive) int {
	pods, err := cs.CoreV1().Pods(o.ManagerNamespace).List(ctx, metav1.ListOptions{LabelSelector: o.ManagerSelector})
	if err != nil {
		a.Failed("listing the manager pods (%s in %s): %v", o.ManagerSelector, o.ManagerNamespace, err)
		return 0
	}
	if len(pods.Items) == 0 {
		a.Failed("no manager pod (%s) in %s: pass --manager-namespace and --manager-selector", o.ManagerSelector, o.ManagerNamespace)
	}
	leader := ""
	if l, err := cs.CoordinationV1().Leases(o.ManagerNamespace).Get(ctx, o.LeaseName, metav1.GetOptions{}); err != nil {
		a.Failed("reading the manager's lease %s/%s: %v", o.ManagerNamespace, o.LeaseName, err)
	} else if l.Spec.HolderIdentity != nil {
		// controller-runtime's identity is "<hostname>_<uuid>": the pod's name first.
		leader, _, _ = strings.Cut(*l.Spec.HolderIdentity, "_")
		a.Add("logs/leader.txt", []byte(*l.Spec.HolderIdentity+"\n"))
	}
	for _, p := range pods.Items {
		role := "standby"
		if p.Name == leader {
			role = "leader"
		}
		if p.Spec.NodeName == "" {
			a.Failed("manager pod %s/%s is not scheduled, it has no logs: kubectl -n %s describe pod %s", p.Namespace, p.Name, p.Namespace, p.Name)
			continue
		}
		restarts := map[string]int32{}
		for _, st := range p.Status.ContainerStatuses {
			restarts[st.Name] = st.RestartCount
		}
		for _, ctr := range p.Spec.Containers {
			name := fmt.Sprintf("logs/%s-%s-%s", p.Name, role, ctr.Name)
			if b, err := podLogs(ctx, cs, &p, ctr.Name, o.Tail, false); err != nil {
				a.Failed("logs of %s/%s container %s: %v", p.Namespace, p.Name, ctr.Name, err)
			} else {
				a.Add(name+".log", b)
			}
			// The previous run's logs: why the container restarted.
			if restarts[ctr.Name] > 0 {
				if b, err := podLogs(ctx, cs, &p, ctr.Name, o.Tail, true); err == nil {
					a.Add(name+"-previous.log", b)
				}
			}
		}
	}
	return len(pods.Items)
}

// podLogs are the last tail lines (0: all) of a container's logs, or of its previous run.
func podLogs(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, container string, tail int64, previous bool) ([]byte, error) {
	lo := &corev1.PodLogOptions{Container: container, Previous: previous}
	if tail > 0 {
		lo.TailLines = &tail
	}
	return cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, lo).DoRaw(ctx)
}

// envoyDump adds the config dump, clusters and stats of one Envoy of the tenant namespace's
// fleet. Envoy's config dump redacts the secrets' private keys.
func envoyDump(ctx context.Context, cfg *rest.Config, c client.Reader, ns string, a *Archive) {
	s, err := envoyadmin.OpenNamespace(ctx, cfg, c, ns)
	if err != nil {
		a.Failed("Envoy of %s: %v", ns, err)
		return
	}
	defer s.Stop()
	_, pod, _ := strings.Cut(s.Pod, "/")
	for _, page := range []struct{ path, file string }{
		{"/config_dump", "config_dump.json"}, {envoyclusters.Path, "clusters.json"}, {"/stats", "stats.txt"},
	} {
		b, err := s.Admin.Get(ctx, page.path)
		if err != nil {
			a.Failed("Envoy %s: %v", s.Pod, err)
			continue
		}
		a.Add("envoy/"+ns+"/"+pod+"/"+page.file, b)
	}
}

// addYAML adds v as YAML.
func addYAML(a *Archive, path string, v any) {
	b, err := yaml.Marshal(v)
	if err != nil {
		a.Failed("writing %s: %v", path, err)
		return
	}
	a.Add(path, b)
}
