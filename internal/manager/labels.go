package manager

import "maps"

// HasAll reports whether have contains every key/value of want.
func HasAll(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Merged returns a copy of have with want's keys set over it.
func Merged(have, want map[string]string) map[string]string {
	out := make(map[string]string, len(have)+len(want))
	maps.Copy(out, have)
	maps.Copy(out, want)
	return out
}
