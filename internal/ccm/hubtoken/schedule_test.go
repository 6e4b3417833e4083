package hubtoken

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestRenewalSchedule(t *testing.T) {
	t.Parallel()
	day := Claims{IssuedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)}
	for name, tc := range map[string]struct {
		c        Claims
		now      time.Time
		fraction float64
		want     time.Time
	}{
		"24h token, 80%": {day, t0.Add(time.Hour), 0.8, t0.Add(19*time.Hour + 12*time.Minute)},
		"a copy loaded a day late is due at once": {day, t0.Add(30 * time.Hour), 0.8, t0.Add(19*time.Hour + 12*time.Minute)},
		"10 min token, 80%":                       {Claims{IssuedAt: t0, ExpiresAt: t0.Add(10 * time.Minute)}, t0, 0.8, t0.Add(8 * time.Minute)},
		"tests: 1% of 10 min":                     {Claims{IssuedAt: t0, ExpiresAt: t0.Add(10 * time.Minute)}, t0, 0.01, t0.Add(6 * time.Second)},
		"no iat: 80% of what is left":             {Claims{ExpiresAt: t0.Add(10 * time.Hour)}, t0.Add(5 * time.Hour), 0.8, t0.Add(9 * time.Hour)},
	} {
		if got := initialRenewAt(tc.c, tc.now, tc.fraction); !got.Equal(tc.want) {
			t.Errorf("%s: renew at %s, want %s", name, got, tc.want)
		}
	}
	// A renewed token is counted from when it was asked for (the local clock), not from its
	// iat (the hub's clock), so clock skew does not move the schedule.
	if got := renewAt(t0, 24*time.Hour, 0.8); !got.Equal(t0.Add(19*time.Hour + 12*time.Minute)) {
		t.Errorf("renewAt = %s", got)
	}
}

func TestRequestTTL(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		c    Claims
		want time.Duration
	}{
		"same lifetime":                {Claims{IssuedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)}, 24 * time.Hour},
		"whole seconds":                {Claims{IssuedAt: t0, ExpiresAt: t0.Add(time.Hour + 1500*time.Millisecond)}, time.Hour + time.Second},
		"at least the API's minimum":   {Claims{IssuedAt: t0, ExpiresAt: t0.Add(time.Minute)}, MinTokenTTL},
		"no iat: what is left, min 10": {Claims{ExpiresAt: t0.Add(2 * time.Hour)}, 2 * time.Hour},
	} {
		if got := requestTTL(tc.c, t0); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}

func TestPlan(t *testing.T) {
	t.Parallel()
	now := t0.Add(time.Hour)
	due := t0.Add(19 * time.Hour)
	for name, tc := range map[string]struct {
		p          plan
		renew, any time.Time
	}{
		"waits for the token to be due":            {plan{renewAt: due}, due, due},
		"401: at once":                             {plan{renewAt: due, unauthorized: true}, now, now},
		"401 during back-off: after the back-off":  {plan{renewAt: due, unauthorized: true, retryAt: now.Add(4 * time.Second)}, now.Add(4 * time.Second), now.Add(4 * time.Second)},
		"overdue after a failure: after back-off":  {plan{renewAt: t0, retryAt: now.Add(time.Minute)}, now.Add(time.Minute), now.Add(time.Minute)},
		"a pending write wakes it earlier":         {plan{renewAt: due, writeAt: now.Add(2 * time.Second)}, due, now.Add(2 * time.Second)},
		"a later write does not delay the renewal": {plan{renewAt: now.Add(time.Second), writeAt: now.Add(time.Hour)}, now.Add(time.Second), now.Add(time.Second)},
	} {
		if got := tc.p.renewDue(now); !got.Equal(tc.renew) {
			t.Errorf("%s: renewal due %s, want %s", name, got, tc.renew)
		}
		if got := tc.p.next(now); !got.Equal(tc.any) {
			t.Errorf("%s: next wake-up %s, want %s", name, got, tc.any)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	b := newBackoff()
	var last time.Duration
	for i := range 20 {
		d := b.Step()
		if d < firstRetry || d > maxRetry+maxRetry/10 {
			t.Fatalf("step %d: %s out of [%s, %s+10%%]", i, d, firstRetry, maxRetry)
		}
		last = d
	}
	if last < maxRetry {
		t.Errorf("after 20 failures the back-off is %s, want the cap %s", last, maxRetry)
	}
}
