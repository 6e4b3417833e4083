package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// TCPPort is a TCP port of a tenant Service.
func TCPPort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, Protocol: corev1.ProtocolTCP}
}

// Traffic is a bounded loop of TCP round trips to one target (one connection and round trip
// at a time, then a pause), counting what succeeds and fails in named phases. It stops when
// told, when the test ends, or after its maximum number of requests.
type Traffic struct {
	target string
	start  time.Time

	mu       sync.Mutex
	phase    string
	phaseAt  time.Time
	ok       map[string]int64
	failed   map[string]int64
	failures []string
	pods     map[string]int64

	stop, done chan struct{}
	once       sync.Once
}

// TrafficResult is what a Traffic counted, by phase.
type TrafficResult struct {
	OK, Failed map[string]int64
	// Failures says when (phase and time into it) and how each failed request failed; at
	// most the first 100.
	Failures []string
	// Pods counts the answers by the backend (Pod) that gave them: on a loopback shared with
	// another test, a Pod of that test may answer (see e2e/faults TestMain).
	Pods map[string]int64
}

// Requests are all the requests of the result, ok or failed.
func (r TrafficResult) Requests() (n int64) {
	for _, v := range r.OK {
		n += v
	}
	for _, v := range r.Failed {
		n += v
	}
	return n
}

// FailedTotal are the failed requests of every phase.
func (r TrafficResult) FailedTotal() (n int64) {
	for _, v := range r.Failed {
		n += v
	}
	return n
}

func (r TrafficResult) String() string {
	var phases []string
	seen := map[string]bool{}
	for _, m := range []map[string]int64{r.OK, r.Failed} {
		for p := range m {
			if !seen[p] {
				seen[p] = true
				phases = append(phases, p)
			}
		}
	}
	var out []string
	for _, p := range phases {
		out = append(out, fmt.Sprintf("%s: %d ok, %d failed", p, r.OK[p], r.Failed[p]))
	}
	return strings.Join(out, "; ")
}

// StartTraffic sends a TCP round trip to target every interval (after the previous one ended),
// at most max times, in the phase "start" until Phase names another.
func StartTraffic(t testenv.TB, target string, every time.Duration, maxRequests int) *Traffic {
	now := time.Now()
	tr := &Traffic{target: target, start: now, phase: "start", phaseAt: now,
		ok: map[string]int64{}, failed: map[string]int64{}, pods: map[string]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() { tr.Stop() })
	go func() {
		defer close(tr.done)
		for i := 0; i < maxRequests; i++ {
			select {
			case <-tr.stop:
				return
			default:
			}
			tr.mu.Lock()
			phase := tr.phase
			tr.mu.Unlock()
			reply, err := testsupport.TCPRoundTrip(target, "traffic")
			tr.mu.Lock()
			if err != nil {
				tr.failed[phase]++
				if len(tr.failures) < 100 {
					tr.failures = append(tr.failures, fmt.Sprintf("%s +%s: %v", phase, time.Since(tr.phaseAt).Round(time.Millisecond), err))
				}
			} else {
				tr.ok[phase]++
				tr.pods[reply.Pod]++
			}
			tr.mu.Unlock()
			select {
			case <-tr.stop:
				return
			case <-time.After(every):
			}
		}
	}()
	return tr
}

// Phase counts the requests sent from now on under name.
func (tr *Traffic) Phase(name string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.phase, tr.phaseAt = name, time.Now()
}

// Result is what was counted so far.
func (tr *Traffic) Result() TrafficResult {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	r := TrafficResult{OK: map[string]int64{}, Failed: map[string]int64{}, Failures: append([]string(nil), tr.failures...),
		Pods: maps.Clone(tr.pods)}
	for k, v := range tr.ok {
		r.OK[k] = v
	}
	for k, v := range tr.failed {
		r.Failed[k] = v
	}
	return r
}

// Stop ends the loop (waiting for the request in flight) and returns what it counted. It may be
// called more than once.
func (tr *Traffic) Stop() TrafficResult {
	tr.once.Do(func() { close(tr.stop) })
	<-tr.done
	return tr.Result()
}

// WaitServes waits until requests to target are answered by exactly the wanted backends.
func WaitServes(t testenv.TB, target string, want ...string) {
	t.Helper()
	testsupport.Eventually(t, time.Minute, fmt.Sprintf("%s served by %v", target, want), func() error {
		seen := map[string]bool{}
		for i := 0; i < 12; i++ {
			reply, err := testsupport.TCPRoundTrip(target, "ping")
			if err != nil {
				return err
			}
			seen[reply.Node] = true
		}
		if len(seen) != len(want) {
			return fmt.Errorf("served by %v", seen)
		}
		for _, w := range want {
			if !seen[w] {
				return fmt.Errorf("served by %v, not by %s", seen, w)
			}
		}
		return nil
	})
}

// WaitEnvoyConnected waits until Envoy's control_plane.connected_state is want (1: its xDS
// stream is up, 0: it is not).
func WaitEnvoyConnected(t testenv.TB, envoy *Envoy, want int64) {
	t.Helper()
	testsupport.Eventually(t, 2*time.Minute, fmt.Sprintf("Envoy's control_plane.connected_state to be %d", want), func() error {
		v, err := envoy.Envoy.Stat("control_plane.connected_state")
		if err != nil {
			return err
		}
		if v != want {
			return fmt.Errorf("connected_state %d", v)
		}
		return nil
	})
}

// WaitProgrammed waits until the LoadBalancer of the tenant Service svc is Programmed=True.
func (tn *Tenant) WaitProgrammed(svc *corev1.Service, timeout time.Duration) {
	t := tn.sys.T
	t.Helper()
	testsupport.Eventually(t, timeout, "the LoadBalancer of "+svc.Name+" to be Programmed", func() error {
		lb := &kubelbv1alpha1.LoadBalancer{}
		if err := tn.sys.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: tn.Namespace, Name: string(svc.UID)}, lb); err != nil {
			return err
		}
		for _, c := range lb.Status.Conditions {
			if c.Type == "Programmed" {
				if c.Status != "True" {
					return fmt.Errorf("Programmed %s: %s", c.Status, c.Message)
				}
				return nil
			}
		}
		return fmt.Errorf("no Programmed condition")
	})
}

// Ingress returns the status.loadBalancer.ingress of the tenant Service default/name, as text.
func (tn *Tenant) Ingress(name string) string {
	t := tn.sys.T
	t.Helper()
	svc := &corev1.Service{}
	if err := tn.Cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(svc.Status.LoadBalancer.Ingress)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// HubServicePorts returns the ports of the tenant Service's hub Service (port, targetPort =
// Envoy listener port, nodePort), as text.
func (tn *Tenant) HubServicePorts(svc *corev1.Service) string {
	t := tn.sys.T
	t.Helper()
	var list corev1.ServiceList
	if err := tn.sys.Hub.Client.List(context.Background(), &list, client.InNamespace(tn.Namespace),
		client.MatchingLabels{kubelbv1alpha1.LabelLoadBalancerName: string(svc.UID)}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d hub Services for %s", len(list.Items), svc.Name)
	}
	var out []string
	for _, p := range list.Items[0].Spec.Ports {
		out = append(out, fmt.Sprintf("%s %d→%s node %d", p.Name, p.Port, p.TargetPort.String(), p.NodePort))
	}
	return strings.Join(out, ", ")
}

// MetricSum scrapes http://addr/metrics and sums the samples of metric whose labels contain
// every one of labels (e.g. `namespace="tenant-a"`).
func MetricSum(addr, metric string, labels ...string) (float64, error) {
	body, err := testsupport.HTTPGetOK("http://"+addr+"/metrics", 5*time.Second)
	if err != nil {
		return 0, err
	}
	var sum float64
lines:
	for _, line := range strings.Split(body, "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || (name != metric && !strings.HasPrefix(name, metric+"{")) {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(name, l) {
				continue lines
			}
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// Footprint is what a tenant Service holds on the hub and shows the tenant: its LoadBalancer's
// listener ports, its hub Service's ports and its address. A fault must change none of them.
type Footprint struct {
	service   *corev1.Service
	listeners map[string]int32
	hubPorts  string
	address   string
}

// Footprint records the footprint of the tenant Service svc (default/svc.Name) now.
func (tn *Tenant) Footprint(svc *corev1.Service) Footprint {
	tn.sys.T.Helper()
	return Footprint{service: svc, listeners: tn.ListenerPorts(svc), hubPorts: tn.HubServicePorts(svc), address: tn.Ingress(svc.Name)}
}

// ExpectFootprint reports, as errors of t, every part of a Service's footprint that differs
// from was.
func (tn *Tenant) ExpectFootprint(t interface {
	Helper()
	Errorf(format string, args ...any)
}, was Footprint) {
	t.Helper()
	now := tn.Footprint(was.service)
	if !maps.Equal(now.listeners, was.listeners) {
		t.Errorf("the listener ports of %s changed: %v → %v", was.service.Name, was.listeners, now.listeners)
	}
	if now.hubPorts != was.hubPorts {
		t.Errorf("the hub Service ports of %s changed: %s → %s", was.service.Name, was.hubPorts, now.hubPorts)
	}
	if now.address != was.address {
		t.Errorf("the address of %s changed: %s → %s", was.service.Name, was.address, now.address)
	}
}

// Listener is the Envoy listener port of the footprint's port name.
func (f Footprint) Listener(name string) int32 { return f.listeners[name] }

// WaitServiceEvent waits for an Event of type and reason on the tenant Service default/name
// whose note carries the hub's words ("kubelb: ...").
func (tn *Tenant) WaitServiceEvent(t testenv.TB, name, typ, reason string) {
	t.Helper()
	testsupport.Eventually(t, time.Minute, fmt.Sprintf("a %s Event %s on Service %s", typ, reason, name), func() error {
		evs := &eventsv1.EventList{}
		if err := tn.Cluster.Client.List(context.Background(), evs, client.InNamespace("default")); err != nil {
			return err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Service" && e.Regarding.Name == name && e.Type == typ && e.Reason == reason && strings.HasPrefix(e.Note, "kubelb: ") {
				return nil
			}
			seen = append(seen, e.Regarding.Name+":"+e.Type+"/"+e.Reason)
		}
		return fmt.Errorf("events %v", seen)
	})
}
