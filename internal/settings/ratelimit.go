package settings

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"

	kubelbv1alpha1 "kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/textcut"
)

// imageReference is the shape of an image reference the CRD admits (its pattern).
var imageReference = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@-]*$`)

// RateLimitStoreError says what is wrong with a Config's spec.rateLimit (nil: nothing). The
// CRD checks the same; this catches objects stored before it did, and hand-made clients.
func RateLimitStoreError(s *kubelbv1alpha1.RateLimitStore) error {
	if s == nil {
		return nil
	}
	if len(s.Image) > 1024 || !imageReference.MatchString(s.Image) {
		return fmt.Errorf("spec.rateLimit.image %q is not an image reference", truncate(s.Image))
	}
	host, port, err := net.SplitHostPort(s.RedisURL)
	if err != nil || host == "" || len(s.RedisURL) > 261 {
		return fmt.Errorf("spec.rateLimit.redisURL %q is not host:port", truncate(s.RedisURL))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("spec.rateLimit.redisURL %q: the port must be 1 to 65535", truncate(s.RedisURL))
	}
	if ip := net.ParseIP(host); ip == nil && !validHostname(host) {
		return errors.New("spec.rateLimit.redisURL: the host must be a DNS name or an IP address")
	}
	return nil
}

var hostname = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

func validHostname(h string) bool { return len(h) <= 253 && hostname.MatchString(h) }

// truncate bounds a value quoted in an error (64 bytes, cut on a character boundary).
func truncate(s string) string { return textcut.Cut(s, 64+len(textcut.Ellipsis), textcut.Ellipsis) }
