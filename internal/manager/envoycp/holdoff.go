package envoycp

import "time"

// HoldOff is how long a tenant's rebuild waits after an event, so that a burst of events
// (1000 Services created at once) costs a few rebuilds, not one per event. Events within the
// hold-off coalesce into one request in the workqueue.
const HoldOff = 100 * time.Millisecond

// StretchHoldOff makes a tenant whose rebuild took longer than HoldOff wait as long again
// before its next rebuild (at most MaxHoldOff): under a burst of events in a large tenant,
// rebuilds then take at most about half of a core instead of running back to back, and
// leave the rest to the controllers that write the hub objects and addresses. The events
// in between are folded into that next rebuild. SetupWithManager turns it on.
func (r *Reconciler) StretchHoldOff() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next = map[string]time.Time{}
}

// MaxHoldOff bounds the hold-off a slow rebuild stretches (StretchHoldOff): a change waits
// at most this long, plus a rebuild, to reach the tenant's proxies.
const MaxHoldOff = 5 * time.Second

// stretchedHoldOff is how long after a rebuild that took took the tenant's next rebuild may
// start: as long as the rebuild took, at most MaxHoldOff. A rebuild faster than HoldOff
// stretches nothing: the event's own HoldOff is longer.
func stretchedHoldOff(took time.Duration) time.Duration { return min(took, MaxHoldOff) }

// deferred returns how long the tenant's rebuild must still wait (0: rebuild now).
func (r *Reconciler) deferred(tenant string, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if next, ok := r.next[tenant]; ok && now.Before(next) {
		return next.Sub(now)
	}
	return 0
}

// rebuilt records a rebuild of the tenant from start to end.
func (r *Reconciler) rebuilt(tenant string, start, end time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next == nil {
		return
	}
	if took := end.Sub(start); took > HoldOff {
		r.next[tenant] = end.Add(stretchedHoldOff(took))
	} else {
		delete(r.next, tenant)
	}
}
