// Package objects holds the object builders and waiters that the controller tests of both
// binaries share, for tests on a real API server (internal/testenv): create, read and edit
// objects (also their status, as the controller a test plays writes it), build the
// namespaces, Config and Tenants kubelb acts on, play the hub's own load balancer
// implementation, wait until an object is there and passes a check, until it is gone, or fail
// when it exists; delete a kind and wait until it is gone; find and wait for Events; count the
// write requests a client sends. Each test package keeps its own timeout and passes it in.
//
// It builds on internal/testsupport (TB, Eventually) and, unlike that leaf, knows the API
// server's client.
package objects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/hubnames"
	"kubelb.dev/kubelb/internal/testsupport"
)

// Create creates objs in order and fails the test on the first error.
func Create(t testsupport.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// Update reads obj (by its name and namespace) afresh, applies mutate and updates it, again
// while the API server answers with a conflict (a controller wrote the object meanwhile, e.g.
// the tenant controller's status counts), as a user's kubectl edit would be retried. obj
// holds the updated object.
func Update[T client.Object](t testsupport.TB, c client.Client, obj T, mutate func(T)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return c.Update(context.Background(), obj)
	})
	if err != nil {
		t.Fatalf("updating %T %s: %v", obj, obj.GetName(), err)
	}
}

// Edit reads obj (by its name and namespace) afresh into a new object, applies mutate and
// updates it, again on any error until timeout (a controller may write the object meanwhile),
// as a user's edit would be retried; it returns the updated object and leaves obj as it is.
func Edit[T client.Object](t testsupport.TB, c client.Client, timeout time.Duration, obj T, mutate func(T)) T {
	t.Helper()
	return edit(t, c, timeout, "updating", obj, mutate, func(ctx context.Context, o T) error { return c.Update(ctx, o) })
}

// EditStatus is Edit for the status of obj, as the controller a test plays writes it.
func EditStatus[T client.Object](t testsupport.TB, c client.Client, timeout time.Duration, obj T, mutate func(T)) T {
	t.Helper()
	return edit(t, c, timeout, "writing the status of", obj, mutate, func(ctx context.Context, o T) error { return c.Status().Update(ctx, o) })
}

func edit[T client.Object](t testsupport.TB, c client.Client, timeout time.Duration, what string, obj T, mutate func(T), write func(context.Context, T) error) T {
	t.Helper()
	var cur T
	testsupport.Eventually(t, timeout, fmt.Sprintf("%s %T %s/%s", what, obj, obj.GetNamespace(), obj.GetName()), func() error {
		cur = obj.DeepCopyObject().(T)
		reset(cur)
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), cur); err != nil {
			return err
		}
		mutate(cur)
		return write(context.Background(), cur)
	})
	return cur
}

// reset empties a typed object but for its kind before it is read again, so that nothing of
// an earlier read stays (decoding into an object keeps map entries and the fields the answer
// leaves out). An Unstructured object is left as it is: a read replaces its content.
func reset(obj client.Object) {
	if _, ok := obj.(runtime.Unstructured); ok {
		return
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	reflect.ValueOf(obj).Elem().SetZero()
	obj.GetObjectKind().SetGroupVersionKind(gvk)
}

// Get reads the object key into obj and returns it; it fails the test when it cannot.
func Get[T client.Object](t testsupport.TB, c client.Reader, key client.ObjectKey, obj T) T {
	t.Helper()
	if err := c.Get(context.Background(), key, obj); err != nil {
		t.Fatalf("reading %T %s: %v", obj, key, err)
	}
	return obj
}

// Namespace is a namespace with labels (nil: none).
func Namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// ManagedNamespace is a hub namespace labelled kubelb.k8c.io/managed-by=kubelb, as the Tenant
// controller makes it: the manager's controllers act only in those.
func ManagedNamespace(name string) *corev1.Namespace {
	return Namespace(name, map[string]string{kubelbv1alpha1.LabelManagedBy: kubelbv1alpha1.LabelManagedByValue})
}

// WaitFor reads the object key into obj (afresh each time) until it exists and check (nil:
// none) accepts it, and returns it.
func WaitFor[T client.Object](t testsupport.TB, c client.Reader, timeout time.Duration, key client.ObjectKey, obj T, check func(T) error) T {
	t.Helper()
	testsupport.Eventually(t, timeout, fmt.Sprintf("%T %s", obj, key), func() error {
		reset(obj)
		if err := c.Get(context.Background(), key, obj); err != nil {
			return err
		}
		if check != nil {
			return check(obj)
		}
		return nil
	})
	return obj
}

// WaitGone waits until obj (by its namespace and name) no longer exists.
func WaitGone(t testsupport.TB, c client.Reader, timeout time.Duration, obj client.Object) {
	t.Helper()
	testsupport.Eventually(t, timeout, fmt.Sprintf("%T %s/%s to be gone", obj, obj.GetNamespace(), obj.GetName()), func() error {
		return Gone(c, obj)
	})
}

// Gone returns nil when obj (by its namespace and name) no longer exists, else an error
// naming what holds it.
func Gone(c client.Reader, obj client.Object) error {
	err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%T %s/%s still exists (finalizers %v)", obj, obj.GetNamespace(), obj.GetName(), obj.GetFinalizers())
}

// DeleteAllOf deletes every object of obj's kind in namespace ns and waits until list (of
// that kind) is empty there, and no Service of ns that also selects (nil: none) is left: what
// a controller removes with them.
func DeleteAllOf(t testsupport.TB, c client.Client, timeout time.Duration, ns string, obj client.Object, list client.ObjectList, also func(client.Object) bool) {
	t.Helper()
	ctx := context.Background()
	if err := c.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, timeout, fmt.Sprintf("%T in %s and their Services to be gone", obj, ns), func() error {
		svcs := &corev1.ServiceList{}
		if err := errors.Join(c.List(ctx, list, client.InNamespace(ns)), c.List(ctx, svcs, client.InNamespace(ns))); err != nil {
			return err
		}
		n := 0
		for i := range svcs.Items {
			if also != nil && also(&svcs.Items[i]) {
				n++
			}
		}
		if left := meta.LenList(list); left+n > 0 {
			return fmt.Errorf("%d left and %d Services", left, n)
		}
		return nil
	})
}

// Absent fails the test unless the object key does not exist (obj receives it otherwise).
func Absent(t testsupport.TB, c client.Reader, key client.ObjectKey, obj client.Object) {
	t.Helper()
	if err := c.Get(context.Background(), key, obj); !apierrors.IsNotFound(err) {
		t.Fatalf("want no %T %s, got err=%v", obj, key, err)
	}
}

// EventFilter selects Events: those regarding an object (by UID when set, else by kind and
// name) with a reason and, when set, a type.
type EventFilter struct {
	Namespace string
	Kind      string
	Name      string
	UID       string
	Reason    string
	Type      string
}

// Events lists the Events of f.Namespace that f selects.
func Events(ctx context.Context, c client.Reader, f EventFilter) ([]eventsv1.Event, error) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(f.Namespace)); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		r := e.Regarding
		same := (f.UID != "" && string(r.UID) == f.UID) || (f.UID == "" && r.Kind == f.Kind && r.Name == f.Name)
		if same && e.Reason == f.Reason && (f.Type == "" || e.Type == f.Type) {
			out = append(out, e)
		}
	}
	return out, nil
}

// ListEvents is Events for a test: it fails the test when the Events cannot be listed.
func ListEvents(t testsupport.TB, c client.Reader, f EventFilter) []eventsv1.Event {
	t.Helper()
	list, err := Events(context.Background(), c, f)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// CountEvents is the number of Events f selects.
func CountEvents(t testsupport.TB, c client.Reader, f EventFilter) int {
	t.Helper()
	return len(ListEvents(t, c, f))
}

// WaitEvent waits for an Event f selects and returns the first.
func WaitEvent(t testsupport.TB, c client.Reader, timeout time.Duration, f EventFilter) eventsv1.Event {
	t.Helper()
	var got eventsv1.Event
	testsupport.Eventually(t, timeout, fmt.Sprintf("%s Event %s on %s %s/%s", f.Type, f.Reason, f.Kind, f.Namespace, f.Name), func() error {
		list, err := Events(context.Background(), c, f)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return fmt.Errorf("no Event yet")
		}
		got = list[0]
		return nil
	})
	return got
}

// WriteCounter counts the write requests (POST, PUT, PATCH, DELETE) a client sends, and
// sums the time each took, by method and path ("METHOD path"), or with ByResource by method
// and resource ("METHOD resource[/subresource]", see Resource). Wrap a rest.Config with it:
// cfg.Wrap(w.RoundTripper).
type WriteCounter struct {
	// ByResource keys the counts by resource rather than by path.
	ByResource bool

	mu      sync.Mutex
	n       map[string]int
	latency map[string]time.Duration
}

// RoundTripper counts the writes next carries. A write is counted when it is sent, and its
// time when the answer comes.
func (w *WriteCounter) RoundTripper(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			return next.RoundTrip(req)
		}
		key := req.Method + " " + req.URL.Path
		if w.ByResource {
			key = req.Method + " " + Resource(req.URL.Path)
		}
		w.mu.Lock()
		if w.n == nil {
			w.n, w.latency = map[string]int{}, map[string]time.Duration{}
		}
		w.n[key]++
		w.mu.Unlock()
		start := time.Now()
		resp, err := next.RoundTrip(req)
		w.mu.Lock()
		w.latency[key] += time.Since(start)
		w.mu.Unlock()
		return resp, err
	})
}

// Resource turns an API path such as /api/v1/namespaces/ns/services/x or
// .../loadbalancers/x/status into "services" or "loadbalancers/status" (a path outside a
// namespace is returned as is).
func Resource(path string) string {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+2 < len(seg); i++ {
		if seg[i] == "namespaces" {
			if i+4 < len(seg) {
				return seg[i+2] + "/" + seg[i+4]
			}
			return seg[i+2]
		}
	}
	return path
}

// Snapshot is a copy of the counts so far (key → requests).
func (w *WriteCounter) Snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.n)
}

// Count is the number of writes of one key so far.
func (w *WriteCounter) Count(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[key]
}

// Total is the number of writes so far.
func (w *WriteCounter) Total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	total := 0
	for _, n := range w.n {
		total += n
	}
	return total
}

// Latency is the time the writes answered so far took, in all and by key.
func (w *WriteCounter) Latency() (time.Duration, map[string]time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var total time.Duration
	for _, d := range w.latency {
		total += d
	}
	return total, maps.Clone(w.latency)
}

// String lists the counts, "key=n" by key, in order.
func (w *WriteCounter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	parts := make([]string, 0, len(w.n))
	for _, k := range slices.Sorted(maps.Keys(w.n)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, w.n[k]))
	}
	return strings.Join(parts, " ")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// MirroredLoadBalancer is a LoadBalancer of tenant "a" as a ccm mirrors one (name from the
// tenant Service's UID, origin labels, a tenant label it claims, an unrelated label, two
// annotations), of type LoadBalancer with ports, for the pure tests of its hub Service and
// status.
func MirroredLoadBalancer(ports ...kubelbv1alpha1.LoadBalancerPort) *kubelbv1alpha1.LoadBalancer {
	return &kubelbv1alpha1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "tenant-a", Name: "0b5f3c1e-uid", UID: "uid-1", Generation: 3,
			Labels: map[string]string{
				kubelbv1alpha1.LabelOriginName: "web", kubelbv1alpha1.LabelOriginNamespace: "default",
				kubelbv1alpha1.LabelTenantName: "a", "unrelated": "x",
			},
			Annotations: map[string]string{"keep.example.com/x": "1", "drop.example.com/y": "2"},
		},
		Spec: kubelbv1alpha1.LoadBalancerSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports},
	}
}

// Config is the platform team's Config "default" in the manager's namespace ns, with spec.
func Config(ns string, spec kubelbv1alpha1.ConfigSpec) *kubelbv1alpha1.Config {
	return &kubelbv1alpha1.Config{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kubelbv1alpha1.DefaultConfigName}, Spec: spec}
}

// AnnotationSettings propagates the tenant annotation keep.example.com/x and gives the hub
// objects of resource the annotations defaults, as the controller tests of the hub check.
func AnnotationSettings(resource kubelbv1alpha1.AnnotatedResource, defaults kubelbv1alpha1.Annotations) kubelbv1alpha1.AnnotationSettings {
	return kubelbv1alpha1.AnnotationSettings{
		PropagatedAnnotations: &map[string]string{"keep.example.com/x": ""},
		DefaultAnnotations:    map[kubelbv1alpha1.AnnotatedResource]kubelbv1alpha1.Annotations{resource: defaults},
	}
}

// Tenant is the Tenant name with spec.
func Tenant(name string, spec kubelbv1alpha1.TenantSpec) *kubelbv1alpha1.Tenant {
	return &kubelbv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

// CreateTenant creates the hub namespace of tenant (tenant-<name>, managed by kubelb, as the
// Tenant controller makes it) and tenant, and returns tenant.
func CreateTenant(t testsupport.TB, c client.Client, tenant *kubelbv1alpha1.Tenant) *kubelbv1alpha1.Tenant {
	t.Helper()
	Create(t, c, ManagedNamespace(hubnames.TenantNamespace(tenant.Name)), tenant)
	return tenant
}

// Annotated is a check for WaitFor: the Service carries the annotation key with value want.
func Annotated(key, want string) func(*corev1.Service) error {
	return func(s *corev1.Service) error {
		if s.Annotations[key] != want {
			return fmt.Errorf("annotation %s=%q wanted, annotations %v", key, want, s.Annotations)
		}
		return nil
	}
}

// PlatformNodePortService is the platform team's own NodePort Service "platform-ingress" in
// namespace ns, with n TCP ports (p0 80, p1 81, …): what a hub must still have room for when
// tenants ask for NodePorts.
func PlatformNodePortService(ns string, n int32) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "platform-ingress"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "platform"}}}
	for i := range n {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: 80 + i, Protocol: corev1.ProtocolTCP})
	}
	return svc
}

// Ingress is the load balancer status entries of IP addresses (nil for none).
func Ingress(ips ...string) []corev1.LoadBalancerIngress {
	if len(ips) == 0 {
		return nil
	}
	out := make([]corev1.LoadBalancerIngress, len(ips))
	for i, ip := range ips {
		out[i].IP = ip
	}
	return out
}

// IngressIPs is the IP addresses of load balancer status entries, in order.
func IngressIPs(ingress []corev1.LoadBalancerIngress) []string {
	var out []string
	for _, in := range ingress {
		out = append(out, in.IP)
	}
	return out
}

// PlayLoadBalancer plays the hub's own load balancer implementation (MetalLB in production):
// it writes the address ip into the status of the Service key, once the Service exists, and
// then the annotations (nil: none) the implementation would add to it.
func PlayLoadBalancer(t testsupport.TB, c client.Client, timeout time.Duration, key client.ObjectKey, ip string, annotations map[string]string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, timeout, "address on the hub Service "+key.String(), func() error {
		svc := &corev1.Service{}
		if err := c.Get(context.Background(), key, svc); err != nil {
			return err
		}
		svc.Status.LoadBalancer.Ingress = Ingress(ip)
		if err := c.Status().Update(context.Background(), svc); err != nil {
			return err
		}
		if annotations == nil {
			return nil
		}
		return c.Patch(context.Background(), svc, client.RawPatch(types.MergePatchType, patch))
	})
}
