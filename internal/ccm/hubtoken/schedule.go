package hubtoken

import (
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Renewal timing.
const (
	// DefaultRenewAfterFraction of a token's lifetime passes before the renewer replaces it,
	// as the kubelet does for projected tokens and the manager for the hub's copy: a ccm that
	// cannot reach the hub for a while still has a fifth of the lifetime left.
	DefaultRenewAfterFraction = 0.8
	// MinTokenTTL is the shortest lifetime the TokenRequest API grants.
	MinTokenTTL = 10 * time.Minute
	// firstRetry and maxRetry bound the back-off between failed attempts.
	firstRetry = time.Second
	maxRetry   = 5 * time.Minute
)

// renewAt is when a token obtained at from, living lifetime, is due for renewal.
func renewAt(from time.Time, lifetime time.Duration, fraction float64) time.Time {
	return from.Add(time.Duration(float64(lifetime) * fraction))
}

// initialRenewAt is when the token the ccm started with is due: counted from its iat, or
// from now when it has none (then its lifetime is what is left of it).
func initialRenewAt(c Claims, now time.Time, fraction float64) time.Time {
	if c.IssuedAt.IsZero() {
		return renewAt(now, c.ExpiresAt.Sub(now), fraction)
	}
	return renewAt(c.IssuedAt, c.Lifetime(), fraction)
}

// requestTTL is the lifetime asked for a new token: that of the current one, whole seconds,
// at least MinTokenTTL.
func requestTTL(c Claims, now time.Time) time.Duration {
	life := c.Lifetime()
	if life == 0 {
		life = c.ExpiresAt.Sub(now)
	}
	return max(life.Truncate(time.Second), MinTokenTTL)
}

// newBackoff is the back-off between failed attempts: 1s, 2s, 4s, … up to 5 min, with 10%
// jitter so that the replicas of a fleet do not retry in step.
func newBackoff() wait.Backoff {
	return wait.Backoff{Duration: firstRetry, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: maxRetry}
}

// plan decides when the renewer acts next.
type plan struct {
	// renewAt is when the current token is due.
	renewAt time.Time
	// retryAt, after a failed attempt, is the earliest time of the next one.
	retryAt time.Time
	// unauthorized: the hub answered 401 to a request made with the current token, so it is
	// due now (but not before retryAt).
	unauthorized bool
	// writeAt, when not zero, is when the tenant Secret is to be written (again).
	writeAt time.Time
}

// renewDue is when the next renewal attempt is due.
func (p plan) renewDue(now time.Time) time.Time {
	due := p.renewAt
	if p.unauthorized && now.Before(due) {
		due = now
	}
	if due.Before(p.retryAt) {
		due = p.retryAt
	}
	return due
}

// next is when the renewer must wake up: for a renewal or a pending write, whichever is first.
func (p plan) next(now time.Time) time.Time {
	due := p.renewDue(now)
	if !p.writeAt.IsZero() && p.writeAt.Before(due) {
		due = p.writeAt
	}
	return due
}
