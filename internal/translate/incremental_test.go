package translate_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	envoytypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/translate"
	"kubelb.dev/kubelb/internal/translate/translatetest"
	"kubelb.dev/kubelb/internal/xds/translator"
)

// tenantState is a tenant as an informer cache holds it: every object has a UID and a
// resourceVersion, and a change replaces the object by a changed copy with a new
// resourceVersion (the cached objects are never modified).
type tenantState struct {
	in      translate.Input
	rng     *rand.Rand
	version int
	created time.Time
	port    int32 // the last listener port handed out
}

func (s *tenantState) nextVersion() string {
	s.version++
	return strconv.Itoa(s.version)
}

// stamp gives every object of the input a UID and a resourceVersion.
func (s *tenantState) stamp() {
	for i := range s.in.LoadBalancers {
		lb := &s.in.LoadBalancers[i]
		lb.UID, lb.ResourceVersion = types.UID("uid-"+lb.Name), s.nextVersion()
	}
	hub := map[string]*corev1.Service{}
	for name, svc := range s.in.HubServices {
		svc = svc.DeepCopy()
		svc.UID, svc.ResourceVersion = types.UID("uid-hub-"+name), s.nextVersion()
		hub[name] = svc
	}
	s.in.HubServices = hub
	addrs := map[string]v1alpha1.Addresses{}
	for name, a := range s.in.Addresses {
		a = *a.DeepCopy()
		a.UID, a.ResourceVersion = types.UID("uid-addresses-"+name), s.nextVersion()
		addrs[name] = a
	}
	s.in.Addresses = addrs
}

func (s *tenantState) lbIndex() int { return s.rng.IntN(len(s.in.LoadBalancers)) }

// replaceLB replaces LoadBalancer i by a changed copy.
func (s *tenantState) replaceLB(i int, change func(lb *v1alpha1.LoadBalancer)) {
	lbs := slices.Clone(s.in.LoadBalancers)
	lb := lbs[i].DeepCopy()
	change(lb)
	lb.ResourceVersion = s.nextVersion()
	lbs[i] = *lb
	s.in.LoadBalancers = lbs
}

// setHub sets (nil: deletes) the hub Service of a LoadBalancer.
func (s *tenantState) setHub(name string, svc *corev1.Service) {
	hub := make(map[string]*corev1.Service, len(s.in.HubServices)+1)
	for k, v := range s.in.HubServices {
		hub[k] = v
	}
	if svc == nil {
		delete(hub, name)
	} else {
		svc.UID, svc.ResourceVersion = types.UID("uid-hub-"+name), s.nextVersion()
		hub[name] = svc
	}
	s.in.HubServices = hub
}

// listenerPort is a listener port not handed out before.
func (s *tenantState) listenerPort() intstr.IntOrString {
	if s.port == 0 {
		s.port = 21000
	}
	s.port++
	return intstr.FromInt32(s.port)
}

// hubFor is a hub Service for the LoadBalancer's ports.
func (s *tenantState) hubFor(lb *v1alpha1.LoadBalancer) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "envoy-" + lb.Name, Namespace: s.in.Tenant}}
	for _, p := range lb.Spec.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Protocol: v1alpha1.ProtocolOrTCP(p.Protocol), Port: p.Port, TargetPort: s.listenerPort()})
	}
	if s.rng.IntN(5) == 0 {
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	}
	return svc
}

// change applies one random change, as a tenant, its ccm, the manager or an operator would,
// and says what it was.
func (s *tenantState) change() string {
	in := &s.in
	switch op := s.rng.IntN(16); {
	case op < 2 || len(in.LoadBalancers) == 0: // a new LoadBalancer, with or without its hub Service
		s.created = s.created.Add(time.Duration(s.rng.IntN(3)) * time.Second)
		name := fmt.Sprintf("new-%d", s.version)
		lb := v1alpha1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: in.Tenant, UID: types.UID("uid-" + name),
			ResourceVersion: s.nextVersion(), CreationTimestamp: metav1.NewTime(s.created)}}
		lb.Spec.Ports = []v1alpha1.LoadBalancerPort{{Name: "http", Port: 80}}
		if s.rng.IntN(3) == 0 {
			lb.Spec.Ports = append(lb.Spec.Ports, v1alpha1.LoadBalancerPort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
		}
		g := v1alpha1.LoadBalancerEndpoints{Ports: []v1alpha1.EndpointPort{{Name: "http", Port: 30080}, {Name: "dns", Port: 30053, Protocol: corev1.ProtocolUDP}}}
		if s.rng.IntN(2) == 0 {
			g.AddressesReference = &corev1.ObjectReference{Name: v1alpha1.DefaultAddressesName}
		} else {
			g.Addresses = []v1alpha1.EndpointAddress{{IP: fmt.Sprintf("10.9.0.%d", s.rng.IntN(4)+1)}, {IP: "127.0.0.1"}, {Hostname: "node.example"}}
		}
		lb.Spec.Endpoints = []v1alpha1.LoadBalancerEndpoints{g}
		in.LoadBalancers = append(slices.Clone(in.LoadBalancers), lb)
		if s.rng.IntN(4) > 0 {
			s.setHub(name, s.hubFor(&lb))
		}
		return "create " + name
	case op == 2: // a LoadBalancer deleted (its hub Service too, most often)
		i := s.lbIndex()
		name := in.LoadBalancers[i].Name
		in.LoadBalancers = slices.Delete(slices.Clone(in.LoadBalancers), i, i+1)
		if s.rng.IntN(3) > 0 {
			s.setHub(name, nil)
		}
		return "delete " + name
	case op == 3: // a port or an endpoint port changed
		i := s.lbIndex()
		s.replaceLB(i, func(lb *v1alpha1.LoadBalancer) {
			if len(lb.Spec.Endpoints) > 0 && len(lb.Spec.Endpoints[0].Ports) > 0 {
				lb.Spec.Endpoints[0].Ports[0].Port = int32(30000 + s.rng.IntN(3))
			}
			if len(lb.Spec.Ports) > 0 && s.rng.IntN(3) == 0 {
				lb.Spec.Ports[0].Port = int32(80 + s.rng.IntN(2))
			}
			lb.Generation++
		})
		return "change the ports of " + in.LoadBalancers[i].Name
	case op == 4: // annotations and labels
		i := s.lbIndex()
		s.replaceLB(i, func(lb *v1alpha1.LoadBalancer) {
			lb.Annotations = map[string]string{v1alpha1.AnnotationProxyProtocol: []string{"v2", "", "bogus"}[s.rng.IntN(3)]}
			lb.Labels = map[string]string{v1alpha1.LabelOriginNamespace: "ns", v1alpha1.LabelOriginName: fmt.Sprintf("svc-%d", s.rng.IntN(3))}
		})
		return "annotate " + in.LoadBalancers[i].Name
	case op == 5: // a status write: translation must not care
		i := s.lbIndex()
		s.replaceLB(i, func(lb *v1alpha1.LoadBalancer) {
			lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
		})
		return "status of " + in.LoadBalancers[i].Name
	case op <= 7: // the hub Service: new listener ports, families, or gone
		lb := &in.LoadBalancers[s.lbIndex()]
		if s.rng.IntN(4) == 0 {
			s.setHub(lb.Name, nil)
			return "delete the hub Service of " + lb.Name
		}
		s.setHub(lb.Name, s.hubFor(lb))
		return "new hub Service ports for " + lb.Name
	case op == 8: // the tenant's nodes
		a := v1alpha1.Addresses{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultAddressesName, UID: "uid-addresses-default", ResourceVersion: s.nextVersion()}}
		for range s.rng.IntN(4) {
			a.Spec.Addresses = append(a.Spec.Addresses, v1alpha1.EndpointAddress{IP: fmt.Sprintf("10.0.0.%d", s.rng.IntN(6)+1)})
		}
		addrs := map[string]v1alpha1.Addresses{}
		for k, v := range in.Addresses {
			addrs[k] = v
		}
		addrs[a.Name] = a
		in.Addresses = addrs
		return "nodes " + fmt.Sprint(a.Spec.Addresses)
	case op == 9: // the tenant's limits
		in.Options.MaxEndpoints = []int{0, 0, 0, 4, 100000}[s.rng.IntN(5)]
		in.Options.MaxEndpointsPerCluster = []int{0, 0, 1}[s.rng.IntN(3)]
		// The health-check budget: none, one that stretches checks, one that turns some off.
		in.Options.HealthCheckProbesPerSecond = []int{0, 0, 1, 5, 1000}[s.rng.IntN(5)]
		in.Options.HealthCheckProxies = 1 + s.rng.IntN(3)
		return fmt.Sprintf("limits %d/%d, health-check budget %d/s from %d proxies", in.Options.MaxEndpoints, in.Options.MaxEndpointsPerCluster,
			in.Options.HealthCheckProbesPerSecond, in.Options.HealthCheckProxies)
	case op == 10: // the endpoint policy and the tenant's upstream settings
		if s.rng.IntN(2) == 0 {
			in.Policy.Allow = nil
		} else {
			in.Policy.Allow = []translate.PolicyRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Source: translate.SourceConfigAllow}}
		}
		in.Options.HealthCheck.Disabled = s.rng.IntN(2) == 0
		return "policy and upstream"
	case op == 11: // a hostname resolves differently
		in.Resolved = map[string]translate.Resolved{"node.example": {Addrs: []netip.Addr{netip.MustParseAddr(fmt.Sprintf("10.8.0.%d", s.rng.IntN(3)+1))}}}
		return "resolved"
	case op == 12: // two LoadBalancers claim one listener port (hub Services restored by hand)
		a, b := &in.LoadBalancers[s.lbIndex()], &in.LoadBalancers[s.lbIndex()]
		sa, sb := in.HubServices[a.Name], in.HubServices[b.Name]
		if sa == nil || sb == nil || len(sa.Spec.Ports) == 0 || len(sb.Spec.Ports) == 0 {
			return "nothing"
		}
		sb = sb.DeepCopy()
		sb.Spec.Ports[0].TargetPort = sa.Spec.Ports[0].TargetPort
		s.setHub(b.Name, sb)
		return "conflict " + a.Name + " " + b.Name
	case op >= 13: // the conflicts resolved: every shared listener port is given anew
		owner := map[intstr.IntOrString]string{}
		for i := range in.LoadBalancers {
			lb := &in.LoadBalancers[i]
			svc := in.HubServices[lb.Name]
			if svc == nil {
				continue
			}
			shared := false
			for _, p := range svc.Spec.Ports {
				if _, taken := owner[p.TargetPort]; taken {
					shared = true
				}
				owner[p.TargetPort] = lb.Name
			}
			if shared {
				s.setHub(lb.Name, s.hubFor(lb))
			}
		}
		return "conflicts resolved"
	}
	return "nothing"
}

// TestIncrementalMatchesRun applies random sequences of changes to tenants — every golden
// input and a larger one; to LoadBalancers, and to the Routes of the golden inputs that have
// some (Ingresses, Gateways, ListenerSets and every route kind: a field changed, a spec
// copied from another Route, a Route gone and back) — and checks after each that translate.Incremental gives exactly
// what a fresh translate.Run gives (the same IR, problems and Route statuses, byte for byte
// when rendered; the back end's Envoy resources byte for byte), that it translated only what
// changed, that it keeps no decoded object of a Route gone, and that it never modified an
// earlier result.
func TestIncrementalMatchesRun(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.in.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	files = append(files, "") // "": a tenant of 40 LoadBalancers made by the changes
	// Some HTTPRoutes and GRPCRoutes must have replayed their last translation (routeMemo)
	// for the comparisons to cover it.
	var replays atomic.Int64
	t.Cleanup(func() {
		if replays.Load() == 0 {
			t.Error("no HTTPRoute or GRPCRoute ever replayed its last translation")
		}
	})
	for _, file := range files {
		name := "generated"
		if file != "" {
			name = filepath.Base(file)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// The generated tenant gets more and longer sequences; every golden a couple.
			seeds, steps := uint64(2), 30
			if file == "" {
				seeds, steps = 6, 120
			}
			for seed := range seeds {
				s := &tenantState{rng: rand.New(rand.NewPCG(seed, 14)), created: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
				if file != "" {
					if s.in, err = translatetest.LoadInput(file); err != nil {
						t.Fatal(err)
					}
				} else {
					s.in = translate.Input{Tenant: "tenant-gen"}
					for len(s.in.LoadBalancers) < 40 {
						s.change()
					}
				}
				s.stamp()
				s.stampRoutes()
				var gone []gonePiece
				var inc translate.Incremental
				var back translator.Cache
				var prev translate.Result
				var prevIR []byte
				reused, full, backReused, decodeReused, routeChanges := 0, 0, 0, 0, 0
				replayed := 0
				for step := range steps {
					what := "first run"
					if step > 0 {
						if (len(s.in.Routes) > 0 || len(gone) > 0) && s.rng.IntN(2) == 0 {
							what = s.routeChange(&gone)
							routeChanges++
						} else {
							what = s.change()
						}
					}
					got, gotErr := inc.Run(s.in)
					want, wantErr := translate.Run(s.in)
					if (gotErr != nil) != (wantErr != nil) {
						t.Fatalf("seed %d step %d (%s): errors %v and %v", seed, step, what, gotErr, wantErr)
					}
					if gotErr != nil {
						continue
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("seed %d step %d (%s): incremental and full translations differ (-full +incremental):\n%s", seed, step, what, cmp.Diff(want, got))
					}
					gotIR, err := json.Marshal(got)
					if err != nil {
						t.Fatal(err)
					}
					wantIR, _ := json.Marshal(want)
					if !bytes.Equal(gotIR, wantIR) {
						t.Fatalf("seed %d step %d (%s): renderings differ", seed, step, what)
					}
					if prev.Config != nil {
						again, _ := json.Marshal(prev)
						if !bytes.Equal(again, prevIR) {
							t.Fatalf("seed %d step %d (%s): the previous result was modified:\n%s", seed, step, what, cmp.Diff(string(prevIR), string(again)))
						}
					}
					prev, prevIR = got, gotIR
					if inc.Stats.RoutesKept > len(s.in.Routes) {
						t.Fatalf("seed %d step %d (%s): %d decoded tenant objects kept for %d Routes", seed, step, what, inc.Stats.RoutesKept, len(s.in.Routes))
					}
					// The back end's Cache builds the same Envoy resources as Translate.
					gotRes, gotProblems, gotErr := back.Translate(got.Config)
					wantRes, wantProblems, wantErr := translator.Translate(want.Config)
					if (gotErr != nil) != (wantErr != nil) || !reflect.DeepEqual(gotProblems, wantProblems) {
						t.Fatalf("seed %d step %d (%s): back end: %v, %v and %v, %v", seed, step, what, gotErr, gotProblems, wantErr, wantProblems)
					}
					for _, typeURL := range slices.Sorted(maps.Keys(wantRes)) {
						if gotOut, wantOut := wire(t, gotRes[typeURL]), wire(t, wantRes[typeURL]); !bytes.Equal(gotOut, wantOut) {
							t.Fatalf("seed %d step %d (%s): the back end's %s differ", seed, step, what, typeURL)
						}
					}
					if len(gotRes) != len(wantRes) {
						t.Fatalf("seed %d step %d (%s): the back end's types differ", seed, step, what)
					}
					if gotOwners, wantOwners := back.Owners(got.Config), translator.Owners(want.Config); !reflect.DeepEqual(gotOwners, wantOwners) {
						t.Fatalf("seed %d step %d (%s): the back end's owners differ (-Owners +Cache.Owners):\n%s", seed, step, what, cmp.Diff(wantOwners, gotOwners))
					}
					backReused += back.Reused
					reused += inc.Stats.Reused
					decodeReused += inc.Stats.RoutesDecodeReused
					replayed += inc.Stats.RoutesReplayed
					if inc.Stats.Full {
						full++
					}
				}
				if len(s.in.LoadBalancers) > 1 && (reused == 0 || backReused == 0) {
					t.Errorf("seed %d: no LoadBalancer's translation was ever reused", seed)
				}
				replays.Add(int64(replayed))
				if routeChanges > 0 && decodeReused == 0 {
					t.Errorf("seed %d: %d Route changes and no Route's decoded object was ever reused", seed, routeChanges)
				}
				if file == "" && (full == 0 || full == steps) {
					t.Errorf("seed %d: %d of %d runs put the LoadBalancers together as Run does; the test must exercise both ways", seed, full, steps)
				}
			}
		})
	}
}

// wire is the resources' deterministic wire form, one after another.
func wire(t *testing.T, rs []envoytypes.Resource) []byte {
	t.Helper()
	var out []byte
	for _, r := range rs {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
		out = append(out, 0)
	}
	return out
}

// TestIncrementalTranslatesOnlyTheChange checks the cost side: in a tenant of 100
// LoadBalancers, a run after one LoadBalancer changed translates that one only, a run after
// nothing changed translates none, and a change of the tenant's nodes translates all.
func TestIncrementalTranslatesOnlyTheChange(t *testing.T) {
	t.Parallel()
	in := tenantOf(100)
	for i := range in.LoadBalancers {
		in.LoadBalancers[i].UID, in.LoadBalancers[i].ResourceVersion = types.UID(fmt.Sprint("uid-", i)), "1"
	}
	for _, svc := range in.HubServices {
		svc.ResourceVersion = "1"
	}
	var inc translate.Incremental
	check := func(what string, translated int) {
		t.Helper()
		got, err := inc.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := translate.Run(in)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: differs from a full translation", what)
		}
		if inc.Stats.Translated != translated || inc.Stats.Reused != len(in.LoadBalancers)-translated || inc.Stats.Full {
			t.Errorf("%s: %+v, want %d translated", what, inc.Stats, translated)
		}
	}
	check("first run", 100)
	check("nothing changed", 0)
	in.LoadBalancers = slices.Clone(in.LoadBalancers)
	in.LoadBalancers[42].Spec = *in.LoadBalancers[42].Spec.DeepCopy()
	in.LoadBalancers[42].Spec.Endpoints[0].Ports[0].Port = 31999
	in.LoadBalancers[42].ResourceVersion = "2"
	check("one LoadBalancer changed", 1)
	in.Addresses = translatetest.BenchAddresses()
	a := in.Addresses["default"]
	a.Spec.Addresses = a.Spec.Addresses[:2]
	in.Addresses["default"] = a
	check("the nodes changed", 100)
}
