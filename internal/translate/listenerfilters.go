package translate

import (
	"slices"

	"kubelb.dev/kubelb/internal/ir"
)

// listenerFilters is a tenant translation's bounded set of one kind of listener filter that
// cannot change per route (Envoy's ext_authz cannot change its service, oauth2 its provider):
// one filter per policy and Route carrying it, made once by name. A filter beyond the bound,
// or one that cannot be made, is refused once with one message, told on every object under
// it; the routes of a refused filter answer 500 (never served without it).
type listenerFilters[T any] struct {
	max     int
	made    map[string]*T
	refused map[string]string
}

// get is the filter named name: made before (again), or made now by build, which returns it
// or why it cannot be made. A refused filter is nil with the message to tell: tooMany's when
// max filters are made already, cannot's of build's reason otherwise.
func (f *listenerFilters[T]) get(name string, build func() (*T, string), tooMany func() string, cannot func(why string) string) (filter *T, again bool, msg string) {
	if f.made == nil {
		f.made, f.refused = map[string]*T{}, map[string]string{}
	}
	if made, ok := f.made[name]; ok {
		return made, true, ""
	}
	if msg, ok := f.refused[name]; ok {
		return nil, false, msg
	}
	if len(f.made) >= f.max {
		msg = tooMany()
	} else if made, why := build(); why == "" {
		f.made[name] = made
		return made, false, ""
	} else {
		msg = cannot(why)
	}
	f.refused[name] = msg
	return nil, false, msg
}

// markListeners gives every HTTP and HTTPS listener the filters of made the routes of the
// route configurations it serves use (names: the names a route configuration uses), sorted by
// name; none (set with nil) when they use none.
func markListeners[T any](cfg *ir.Config, made map[string]*T, names func(*ir.RouteConfig) []string, set func(*ir.Listener, []T)) {
	if len(made) == 0 {
		return
	}
	uses := map[string][]string{}
	for _, rc := range cfg.RouteConfigs {
		if n := names(rc); len(n) > 0 {
			uses[rc.Name] = n
		}
	}
	for _, l := range cfg.Listeners {
		served, ok := routeConfigsOf(l)
		if !ok {
			continue
		}
		var used []string
		for _, rc := range served {
			used = append(used, uses[rc]...)
		}
		slices.Sort(used)
		used = slices.Compact(used)
		var filters []T
		for _, n := range used {
			filters = append(filters, *made[n])
		}
		set(l, filters)
	}
}
