package framework

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
)

// RestartCCM starts the tenant's ccm again with the arguments it had (after it was killed or
// stopped; a ccm still running is killed first). Its log goes to a new file, "<name>-restarted".
func (tn *Tenant) RestartCCM() {
	t := tn.sys.T
	t.Helper()
	old := tn.CCM
	old.Kill()
	tn.CCM = testsupport.StartProcess(t, old.Name+"-restarted", old.Cmd.Path, old.Cmd.Args[1:]...)
}

// LoadBalancerServices are the tenant's Services (every namespace) the ccm mirrors: of type
// LoadBalancer and of no other class than kubelb's. Those being deleted are included.
func (tn *Tenant) LoadBalancerServices(ctx context.Context) ([]corev1.Service, error) {
	var list corev1.ServiceList
	if err := tn.Cluster.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing tenant Services: %w", err)
	}
	var out []corev1.Service
	for _, s := range list.Items {
		c := s.Spec.LoadBalancerClass
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer && (c == nil || *c == kubelbv1alpha1.DefaultClass) {
			out = append(out, s)
		}
	}
	return out, nil
}

// CheckMirrors compares the tenant's LoadBalancer Services with what the hub holds for them,
// as a user of the tenant and the hub would see it, and returns the differences (nil when
// in line):
//   - no tenant Service is left being deleted (the ccm released them all);
//   - exactly one hub LoadBalancer per live Service, named by its UID, exposing the Service's
//     ports (number and protocol), and no other LoadBalancer (no orphan, no duplicate);
//   - exactly one hub Service per LoadBalancer (label kubelb.k8c.io/lb-name) and none for a
//     LoadBalancer that does not exist;
//   - every live Service shows an address in status.loadBalancer.ingress.
func (tn *Tenant) CheckMirrors(ctx context.Context) error {
	hub := tn.sys.Hub.Client
	svcs, err := tn.LoadBalancerServices(ctx)
	if err != nil {
		return err
	}
	var lbs kubelbv1alpha1.LoadBalancerList
	if err := hub.List(ctx, &lbs, client.InNamespace(tn.Namespace)); err != nil {
		return fmt.Errorf("listing hub LoadBalancers: %w", err)
	}
	var hubSvcs corev1.ServiceList
	if err := hub.List(ctx, &hubSvcs, client.InNamespace(tn.Namespace), client.HasLabels{kubelbv1alpha1.LabelLoadBalancerName}); err != nil {
		return fmt.Errorf("listing hub Services: %w", err)
	}
	var problems []string
	lbByName := map[string]*kubelbv1alpha1.LoadBalancer{}
	for i := range lbs.Items {
		lbByName[lbs.Items[i].Name] = &lbs.Items[i]
	}
	live := map[string]bool{}
	for _, s := range svcs {
		key := s.Namespace + "/" + s.Name
		if s.DeletionTimestamp != nil {
			problems = append(problems, fmt.Sprintf("Service %s is still being deleted (finalizers %v)", key, s.Finalizers))
			continue
		}
		live[string(s.UID)] = true
		lb := lbByName[string(s.UID)]
		if lb == nil {
			problems = append(problems, fmt.Sprintf("Service %s has no LoadBalancer", key))
			continue
		}
		if want, got := portSet(s.Spec.Ports, func(p corev1.ServicePort) (int32, corev1.Protocol) { return p.Port, p.Protocol }),
			portSet(lb.Spec.Ports, func(p kubelbv1alpha1.LoadBalancerPort) (int32, corev1.Protocol) { return p.Port, p.Protocol }); want != got {
			problems = append(problems, fmt.Sprintf("LoadBalancer of %s exposes %s, the Service %s", key, got, want))
		}
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			problems = append(problems, fmt.Sprintf("Service %s has no address", key))
		}
	}
	for _, lb := range lbs.Items {
		if !live[lb.Name] {
			problems = append(problems, fmt.Sprintf("orphaned LoadBalancer %s (of %s/%s)", lb.Name,
				lb.Labels[kubelbv1alpha1.LabelOriginNamespace], lb.Labels[kubelbv1alpha1.LabelOriginName]))
		}
	}
	perLB := map[string]int{}
	for _, s := range hubSvcs.Items {
		name := s.Labels[kubelbv1alpha1.LabelLoadBalancerName]
		perLB[name]++
		if lbByName[name] == nil {
			problems = append(problems, fmt.Sprintf("orphaned hub Service %s (of LoadBalancer %s)", s.Name, name))
		}
	}
	for name := range lbByName {
		if live[name] && perLB[name] != 1 {
			problems = append(problems, fmt.Sprintf("%d hub Services for LoadBalancer %s", perLB[name], name))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	if len(problems) > 10 {
		problems = append(problems[:10], fmt.Sprintf("and %d more", len(problems)-10))
	}
	return fmt.Errorf("%d Services, %d LoadBalancers, %d hub Services: %s", len(svcs), len(lbs.Items), len(hubSvcs.Items), strings.Join(problems, "; "))
}

// portSet is ports as sorted "port/protocol" text (no protocol: TCP).
func portSet[P any](ports []P, of func(P) (int32, corev1.Protocol)) string {
	var out []string
	for _, p := range ports {
		port, proto := of(p)
		out = append(out, fmt.Sprintf("%d/%s", port, cmp.Or(proto, corev1.ProtocolTCP)))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// RuntimeSample is what a Go binary reports of its own runtime on /metrics.
type RuntimeSample struct {
	Goroutines float64
	// HeapInuse is go_memstats_heap_inuse_bytes.
	HeapInuse float64
}

// SampleRuntime reads go_goroutines and go_memstats_heap_inuse_bytes from http://addr/metrics.
func SampleRuntime(addr string) (RuntimeSample, error) {
	g, err := MetricSum(addr, "go_goroutines")
	if err != nil {
		return RuntimeSample{}, err
	}
	h, err := MetricSum(addr, "go_memstats_heap_inuse_bytes")
	if err != nil {
		return RuntimeSample{}, err
	}
	if g == 0 || h == 0 {
		return RuntimeSample{}, fmt.Errorf("%s/metrics has no go_goroutines or go_memstats_heap_inuse_bytes", addr)
	}
	return RuntimeSample{Goroutines: g, HeapInuse: h}, nil
}

// RuntimeWindow is the mean of the samples of one binary taken during a window of time.
type RuntimeWindow struct {
	Samples int
	Mean    RuntimeSample
	Max     RuntimeSample
}

func (w RuntimeWindow) String() string {
	return fmt.Sprintf("goroutines %.0f (max %.0f), heap in use %.1f MiB (max %.1f MiB), %d samples",
		w.Mean.Goroutines, w.Max.Goroutines, w.Mean.HeapInuse/(1<<20), w.Max.HeapInuse/(1<<20), w.Samples)
}

// RuntimeSampler samples the runtime of binaries (by name, their metrics address) at a
// fixed interval and keeps every sample with its time, so that windows (the first and the
// last minute of a run) can be read afterwards. It stops when told or when the test ends.
type RuntimeSampler struct {
	addrs   map[string]string
	samples map[string][]timedSample
	errs    map[string]int
	stop    chan struct{}
	done    chan struct{}
}

type timedSample struct {
	at time.Time
	s  RuntimeSample
}

// StartRuntimeSampler samples each binary of addrs (name → metrics address) every interval.
func StartRuntimeSampler(t testsupport.TB, addrs map[string]string, every time.Duration) *RuntimeSampler {
	r := &RuntimeSampler{addrs: addrs, samples: map[string][]timedSample{}, errs: map[string]int{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			for name, addr := range r.addrs {
				if s, err := SampleRuntime(addr); err == nil {
					r.samples[name] = append(r.samples[name], timedSample{time.Now(), s})
				} else {
					r.errs[name]++
				}
			}
			select {
			case <-r.stop:
				return
			case <-time.After(every):
			}
		}
	}()
	t.Cleanup(r.Stop)
	return r
}

// Stop ends the sampling (it may be called more than once).
func (r *RuntimeSampler) Stop() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

// Window summarizes the samples of binary name taken in [from, to). Call it after Stop.
func (r *RuntimeSampler) Window(name string, from, to time.Time) RuntimeWindow {
	var w RuntimeWindow
	for _, ts := range r.samples[name] {
		if ts.at.Before(from) || !ts.at.Before(to) {
			continue
		}
		w.Samples++
		w.Mean.Goroutines += ts.s.Goroutines
		w.Mean.HeapInuse += ts.s.HeapInuse
		w.Max.Goroutines = max(w.Max.Goroutines, ts.s.Goroutines)
		w.Max.HeapInuse = max(w.Max.HeapInuse, ts.s.HeapInuse)
	}
	if w.Samples > 0 {
		w.Mean.Goroutines /= float64(w.Samples)
		w.Mean.HeapInuse /= float64(w.Samples)
	}
	return w
}

// Errors is how many scrapes of binary name failed.
func (r *RuntimeSampler) Errors(name string) int { return r.errs[name] }

// MetricSeries returns the series (name and labels, without value) of http://addr/metrics
// whose text contains every one of labels, e.g. `tenant="b"`.
func MetricSeries(addr string, labels ...string) ([]string, error) {
	body, err := testsupport.HTTPGetOK("http://"+addr+"/metrics", 5*time.Second)
	if err != nil {
		return nil, err
	}
	var out []string
lines:
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, _, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(name, l) {
				continue lines
			}
		}
		out = append(out, name)
	}
	return out, nil
}
