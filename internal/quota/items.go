package quota

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Kinds a tenant writes that are counted on their own (AdmitItems), not with LoadBalancers
// and Routes.
const (
	KindSyncSecret Kind = "SyncSecret"
	KindAddresses  Kind = "Addresses"
)

// Item is what AdmitItems needs to know of one object.
type Item struct {
	Name    string
	Created time.Time
	// Bytes is what the object counts against the byte limit (0 when the kind has none).
	Bytes int64
}

// ItemLimits are the limits of one kind AdmitItems applies: at most Count objects, whose
// Bytes add up to at most Bytes (negative: no byte limit), named by their spec.limits fields.
type ItemLimits struct {
	Count      int
	CountField string
	Bytes      int64
	BytesField string
}

// ItemVerdict is the outcome of AdmitItems: the refused objects with their messages.
type ItemVerdict struct {
	refused map[string]string
	// Used is the number of objects admitted, UsedBytes what they take.
	Used      int
	UsedBytes int64
}

// Refused returns the message of a refused object and true, or "" and false.
func (v ItemVerdict) Refused(name string) (string, bool) {
	msg, ok := v.refused[name]
	return msg, ok
}

// RefusedNames returns the names of the refused objects, sorted.
func (v ItemVerdict) RefusedNames() []string {
	out := make([]string, 0, len(v.refused))
	for n := range v.refused {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// AdmitItems decides which objects of one kind of the tenant in namespace are admitted, by
// Admit's rule: oldest first (creationTimestamp, then name), the object beyond the count
// refused, and the object whose bytes, added to those of the older admitted ones, exceed the
// byte limit refused (a smaller, newer one may still fit). It is pure and deterministic.
// Objects being deleted should not be passed.
func AdmitItems(namespace string, kind Kind, items []Item, l ItemLimits) ItemVerdict {
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		a, b := &items[i], &items[j]
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Name, b.Name))
	})
	v := ItemVerdict{refused: map[string]string{}}
	for rank, i := range order {
		it := &items[i]
		if rank+1 > l.Count {
			v.refused[it.Name] = fmt.Sprintf("tenant %s may hold %d %s (spec.limits.%s); this is the %s oldest — delete another or ask the platform team to raise the limit",
				namespace, l.Count, plural(kind, l.Count), l.CountField, ordinal(rank+1))
			continue
		}
		if l.Bytes >= 0 && v.UsedBytes+it.Bytes > l.Bytes {
			v.refused[it.Name] = fmt.Sprintf("the %s of tenant %s may take %d bytes (spec.limits.%s); older ones take %d and this one takes %d — delete or shrink another or ask the platform team to raise the limit",
				plural(kind, 2), namespace, l.Bytes, l.BytesField, v.UsedBytes, it.Bytes)
			continue
		}
		v.Used++
		v.UsedBytes += it.Bytes
	}
	return v
}
