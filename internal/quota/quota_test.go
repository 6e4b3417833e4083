package quota

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/settings"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func lb(name string, age, ports int) Object {
	return Object{Kind: KindLoadBalancer, Name: name, Created: t0.Add(time.Duration(-age) * time.Minute), Ports: ports}
}

func rt(name string, age, ports int) Object {
	return Object{Kind: KindRoute, Name: name, Created: t0.Add(time.Duration(-age) * time.Minute), Ports: ports}
}

func ingress(o Object) Object { o.Shared, o.SharedPorts = sharedIngress, IngressServicePorts; return o }

func limits(lbs, routes, ports int) settings.Limits {
	return settings.Limits{LoadBalancers: lbs, Routes: routes, ListenerPorts: ports, EndpointsPerCluster: 1000, ObjectBytes: 1 << 30}
}

func refused(v Verdict) []string {
	var out []string
	for _, k := range []Kind{KindLoadBalancer, KindRoute} {
		for _, n := range v.RefusedNames(k) {
			out = append(out, string(k)+"/"+n)
		}
	}
	return out
}

func TestAdmit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		objs    []Object
		limits  settings.Limits
		refused []string
		msg     map[string]string // refused object → a part of its message
	}{
		{
			name:    "the third oldest LoadBalancer is refused",
			objs:    []Object{lb("c", 1, 1), lb("a", 3, 1), lb("b", 2, 1)},
			limits:  limits(2, 10, 100),
			refused: []string{"LoadBalancer/c"},
			msg: map[string]string{"LoadBalancer/c": "tenant tenant-a may hold 2 LoadBalancers (spec.limits.loadBalancers); " +
				"this is the 3rd oldest — delete another or ask the platform team to raise the limit"},
		},
		{
			name:    "equal creation times are ranked by name",
			objs:    []Object{lb("b", 0, 1), lb("a", 0, 1)},
			limits:  limits(1, 10, 100),
			refused: []string{"LoadBalancer/b"},
		},
		{
			name:    "Routes are counted apart from LoadBalancers",
			objs:    []Object{lb("a", 5, 1), rt("r1", 4, 0), rt("r2", 3, 0), lb("b", 2, 1)},
			limits:  limits(2, 1, 100),
			refused: []string{"Route/r2"},
			msg:     map[string]string{"Route/r2": "may hold 1 Route (spec.limits.routes); this is the 2nd oldest"},
		},
		{
			name:    "listener ports: a multi-port LoadBalancer that does not fit is refused, a smaller newer one fits",
			objs:    []Object{lb("a", 4, 2), lb("big", 3, 3), lb("small", 2, 1)},
			limits:  limits(10, 10, 4),
			refused: []string{"LoadBalancer/big"},
			msg: map[string]string{"LoadBalancer/big": "may hold 4 listener ports (spec.limits.listenerPorts); " +
				"older objects hold 2 and this LoadBalancer needs 3 more"},
		},
		{
			name:    "listener ports are shared between LoadBalancers and Gateways",
			objs:    []Object{rt("gw", 4, 3), lb("a", 3, 2)},
			limits:  limits(10, 10, 4),
			refused: []string{"LoadBalancer/a"},
		},
		{
			name:   "the Ingress Service's ports are paid once, by the oldest admitted member",
			objs:   []Object{ingress(rt("i1", 5, 0)), ingress(rt("i2", 4, 0)), ingress(lb("host", 3, 1))},
			limits: limits(10, 10, 3),
		},
		{
			name:    "an Ingress that would bring the Ingress Service over the limit is refused",
			objs:    []Object{lb("a", 5, 3), ingress(rt("i1", 4, 0))},
			limits:  limits(10, 10, 4),
			refused: []string{"Route/i1"},
			msg:     map[string]string{"Route/i1": "this Route needs 2 more"},
		},
		{
			name:    "an object refused by its count takes no ports",
			objs:    []Object{lb("a", 3, 1), lb("b", 2, 5), lb("c", 1, 1)},
			limits:  limits(1, 10, 2),
			refused: []string{"LoadBalancer/b", "LoadBalancer/c"},
			msg:     map[string]string{"LoadBalancer/c": "this is the 3rd oldest"},
		},
		{
			name:   "objects without ports are never refused for ports",
			objs:   []Object{lb("a", 2, 0), rt("r", 1, 0)},
			limits: limits(10, 10, 0),
		},
		{
			name:    "zero LoadBalancers allowed",
			objs:    []Object{lb("a", 2, 1)},
			limits:  limits(0, 10, 10),
			refused: []string{"LoadBalancer/a"},
			msg:     map[string]string{"LoadBalancer/a": "may hold 0 LoadBalancers"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := Admit("tenant-a", tc.objs, tc.limits)
			if got := refused(v); !slices.Equal(got, tc.refused) {
				t.Fatalf("refused %q, want %q", got, tc.refused)
			}
			for key, want := range tc.msg {
				kind, name, _ := strings.Cut(key, "/")
				msg, ok := v.Refused(Kind(kind), name)
				if !ok || !strings.Contains(msg, want) {
					t.Errorf("message of %s = %q, want it to contain %q", key, msg, want)
				}
			}
		})
	}
}

func TestOrdinal(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th",
		21: "21st", 22: "22nd", 101: "101st", 111: "111th", 1003: "1003rd"} {
		if got := ordinal(n); got != want {
			t.Errorf("ordinal(%d) = %q, want %q", n, got, want)
		}
	}
}

// randomObjects makes n objects of both kinds with few distinct creation times (ties), port
// needs from 0 to 4 and some members of the shared Ingress ports.
func randomObjects(r *rand.Rand, n int) []Object {
	out := make([]Object, n)
	for i := range out {
		o := Object{Kind: KindLoadBalancer, Name: fmt.Sprintf("o%03d", r.IntN(1000)), Created: t0.Add(time.Duration(r.IntN(5)) * time.Second),
			Ports: r.IntN(5)}
		if r.IntN(2) == 0 {
			o.Kind = KindRoute
		}
		if r.IntN(4) == 0 {
			o = ingress(o)
		}
		out[i] = o
	}
	// Names are unique per kind, as in a namespace.
	seen := map[Ref]bool{}
	uniq := out[:0]
	for _, o := range out {
		if !seen[Ref{o.Kind, o.Name}] {
			seen[Ref{o.Kind, o.Name}] = true
			uniq = append(uniq, o)
		}
	}
	return uniq
}

func rank(objs []Object) []Object {
	s := slices.Clone(objs)
	slices.SortFunc(s, func(a, b Object) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(string(a.Kind), string(b.Kind))
	})
	return s
}

// TestAdmitProperties checks, on random inputs, what Admit promises: the limits hold, the
// order of the input does not matter, a newer object never displaces an older one, raising
// a limit refuses nothing that was admitted, and every refusal is explained.
func TestAdmitProperties(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		objs := randomObjects(r, r.IntN(40))
		l := limits(r.IntN(15), r.IntN(15), r.IntN(40))
		v := Admit("tenant-x", objs, l)

		// The limits hold, and UsedPorts is what the admitted objects need.
		counts := map[Kind]int{}
		ports, paid := 0, map[string]bool{}
		for _, o := range rank(objs) {
			msg, isRefused := v.Refused(o.Kind, o.Name)
			if isRefused {
				if msg == "" || !strings.Contains(msg, "tenant-x") || !strings.Contains(msg, "spec.limits.") {
					t.Fatalf("case %d: refusal of %s/%s is not explained: %q", i, o.Kind, o.Name, msg)
				}
				continue
			}
			counts[o.Kind]++
			ports += o.Ports
			if o.Shared != "" && !paid[o.Shared] {
				paid[o.Shared] = true
				ports += o.SharedPorts
			}
		}
		if counts[KindLoadBalancer] > l.LoadBalancers || counts[KindRoute] > l.Routes || ports > l.ListenerPorts || ports != v.UsedPorts {
			t.Fatalf("case %d: admitted %v holding %d ports (verdict says %d) under %+v", i, counts, ports, v.UsedPorts, l)
		}

		// The order of the input does not matter.
		shuffled := slices.Clone(objs)
		r.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		if got, want := refused(Admit("tenant-x", shuffled, l)), refused(v); !slices.Equal(got, want) {
			t.Fatalf("case %d: a shuffled input refuses %q, the input %q", i, got, want)
		}

		// A newer object never changes the verdict of the older ones.
		newer := Object{Kind: KindLoadBalancer, Name: "newest", Created: t0.Add(time.Hour), Ports: 3}
		if r.IntN(2) == 0 {
			newer = ingress(Object{Kind: KindRoute, Name: "newest", Created: t0.Add(time.Hour)})
		}
		w := Admit("tenant-x", append(slices.Clone(objs), newer), l)
		for _, o := range objs {
			if v.Admitted(o.Kind, o.Name) != w.Admitted(o.Kind, o.Name) {
				t.Fatalf("case %d: a newer object changed the verdict of %s/%s", i, o.Kind, o.Name)
			}
		}

		// Raising a count limit refuses nothing that was admitted while ports are plenty.
		// (With a binding listenerPorts limit it may: an older object admitted anew can
		// take the ports of a newer one.)
		plenty := l
		plenty.ListenerPorts = 1 << 20
		before := Admit("tenant-x", objs, plenty)
		raised := plenty
		raised.LoadBalancers += 1 + r.IntN(3)
		raised.Routes += r.IntN(3)
		after := Admit("tenant-x", objs, raised)
		for _, o := range objs {
			if before.Admitted(o.Kind, o.Name) && !after.Admitted(o.Kind, o.Name) {
				t.Fatalf("case %d: raising a count limit (%+v → %+v) refused %s/%s", i, plenty, raised, o.Kind, o.Name)
			}
		}
	}
}

// TestAdmitLarge checks that the cost is the sort plus a walk: 100000 objects (the most
// the API allows of each kind is 100000) are admitted well within a test's time, and all the
// allowed ones are.
func TestAdmitLarge(t *testing.T) {
	t.Parallel()
	objs := make([]Object, 0, 200000)
	for i := range 100000 {
		objs = append(objs, lb(fmt.Sprintf("lb-%06d", i), i, 1), rt(fmt.Sprintf("rt-%06d", i), i, 0))
	}
	v := Admit("tenant-a", objs, limits(1000, 1000, 500))
	if n := len(v.RefusedNames(KindLoadBalancer)); n != 100000-500 {
		t.Fatalf("refused %d LoadBalancers, want %d (500 fit in 500 ports)", n, 100000-500)
	}
	if n := len(v.RefusedNames(KindRoute)); n != 100000-1000 {
		t.Fatalf("refused %d Routes, want %d", n, 100000-1000)
	}
	// The oldest are the admitted ones: the LoadBalancers are named by age, oldest last.
	if !v.Admitted(KindLoadBalancer, "lb-099999") || v.Admitted(KindLoadBalancer, "lb-000000") {
		t.Fatal("the oldest LoadBalancers are not the admitted ones")
	}
}

// TestAdmitObjectBytes: limits.objectBytes refuses the object whose bytes, added to those of
// the older admitted objects, exceed it; a smaller, newer one still fits.
func TestAdmitObjectBytes(t *testing.T) {
	t.Parallel()
	sized := func(o Object, n int64) Object { o.Bytes = n; return o }
	l := limits(10, 10, 10)
	l.ObjectBytes = 1000
	v := Admit("tenant-a", []Object{
		sized(lb("old", 3, 0), 600), sized(rt("big", 2, 0), 500), sized(rt("small", 1, 0), 400),
	}, l)
	if got := refused(v); fmt.Sprint(got) != "[Route/big]" {
		t.Fatalf("refused %v, want [Route/big]", got)
	}
	msg, _ := v.Refused(KindRoute, "big")
	for _, part := range []string{"1000 bytes (spec.limits.objectBytes)", "older objects take 600", "this Route takes 500"} {
		if !strings.Contains(msg, part) {
			t.Errorf("message %q lacks %q", msg, part)
		}
	}
	if v.UsedBytes != 1000 {
		t.Errorf("UsedBytes %d, want 1000", v.UsedBytes)
	}
}

// TestAdmitItems: SyncSecrets (or Addresses) oldest first, refused past the count and past
// the byte limit, a smaller newer one still fitting; no byte limit when Bytes < 0.
func TestAdmitItems(t *testing.T) {
	t.Parallel()
	item := func(name string, age int, n int64) Item {
		return Item{Name: name, Created: t0.Add(time.Duration(-age) * time.Minute), Bytes: n}
	}
	items := []Item{item("d", 1, 10), item("a", 4, 60), item("c", 2, 10), item("b", 3, 50), item("e", 0, 10)}
	v := AdmitItems("tenant-b", KindSyncSecret, items, ItemLimits{Count: 4, CountField: "syncSecrets", Bytes: 100, BytesField: "syncSecretBytes"})
	if got := v.RefusedNames(); fmt.Sprint(got) != "[b e]" {
		t.Fatalf("refused %v, want [b e]", got)
	}
	if msg, _ := v.Refused("b"); !strings.Contains(msg, "may take 100 bytes (spec.limits.syncSecretBytes); older ones take 60 and this one takes 50") {
		t.Errorf("b: %s", msg)
	}
	if msg, _ := v.Refused("e"); !strings.Contains(msg, "tenant-b may hold 4 SyncSecrets (spec.limits.syncSecrets); this is the 5th oldest") {
		t.Errorf("e: %s", msg)
	}
	if v.Used != 3 || v.UsedBytes != 80 {
		t.Errorf("used %d, %d bytes", v.Used, v.UsedBytes)
	}
	v = AdmitItems("tenant-b", KindAddresses, items, ItemLimits{Count: 1, CountField: "addresses", Bytes: -1})
	if msg, _ := v.Refused("b"); !strings.Contains(msg, "may hold 1 Addresses (spec.limits.addresses); this is the 2nd oldest") {
		t.Errorf("Addresses b: %s", msg)
	}
}
