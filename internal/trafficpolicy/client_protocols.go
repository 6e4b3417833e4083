package trafficpolicy

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kubelb.dev/kubelb/api/v1alpha1"
)

// resolveClientProtocols checks the connection and protocol options of a ClientTrafficPolicy
// (tcpKeepalive, http1, http2, http3, path, PROXY protocol) into out.
func resolveClientProtocols(ct *v1alpha1.ClientTraffic, out *ClientSettings) []error {
	var errs []error
	if k := ct.TCPKeepalive; k != nil {
		ka := &Keepalive{}
		if p := k.Probes; p != nil {
			if *p < 1 || *p > MaxKeepaliveProbes {
				errs = append(errs, fmt.Errorf("tcpKeepalive.probes %d is out of range; use 1 to %d", *p, MaxKeepaliveProbes))
			} else {
				ka.Probes = uint32(*p)
			}
		}
		for _, f := range []struct {
			field, v string
			to       *time.Duration
		}{{"tcpKeepalive.idleTime", k.IdleTime, &ka.IdleTime}, {"tcpKeepalive.interval", k.Interval, &ka.Interval}} {
			d, err := clientDuration(f.field, f.v, MaxKeepaliveTime)
			switch {
			case err != nil:
				errs = append(errs, err)
			case d%time.Second != 0:
				errs = append(errs, fmt.Errorf("%s %s is not whole seconds; the socket option counts seconds", f.field, f.v))
			default:
				*f.to = d
			}
		}
		out.Keepalive = ka
	}
	if h := ct.HTTP1; h != nil {
		out.HTTP1Trailers, out.HTTP1PreserveHeaderCase = isTrue(h.EnableTrailers), isTrue(h.PreserveHeaderCase)
		if h.HTTP10 != nil {
			out.HTTP10, out.HTTP10DefaultHost = true, isTrue(h.HTTP10.UseDefaultHost)
		}
	}
	if h := ct.HTTP2; h != nil {
		h2 := &HTTP2{}
		var err error
		if h.InitialStreamWindowSize != nil {
			if h2.InitialStreamWindowSize, err = byteSize("http2.initialStreamWindowSize", h.InitialStreamWindowSize, MinHTTP2Window, MaxHTTP2StreamWindow); err != nil {
				errs = append(errs, err)
			}
		}
		if h.InitialConnectionWindowSize != nil {
			if h2.InitialConnectionWindowSize, err = byteSize("http2.initialConnectionWindowSize", h.InitialConnectionWindowSize, MinHTTP2Window, MaxHTTP2ConnectionWindow); err != nil {
				errs = append(errs, err)
			}
		}
		if n := h.MaxConcurrentStreams; n != nil {
			if *n < 1 || *n > MaxHTTP2ConcurrentStreams {
				errs = append(errs, fmt.Errorf("http2.maxConcurrentStreams %d is out of range; use 1 to %d", *n, MaxHTTP2ConcurrentStreams))
			} else {
				h2.MaxConcurrentStreams = uint32(*n)
			}
		}
		switch h.OnInvalidMessage {
		case "", "TerminateConnection":
		case "TerminateStream":
			h2.TerminateStream = true
		default:
			errs = append(errs, fmt.Errorf("http2.onInvalidMessage %q is not an action; use TerminateConnection or TerminateStream", truncate(h.OnInvalidMessage)))
		}
		if *h2 != (HTTP2{}) {
			out.HTTP2 = h2
		}
	}
	out.HTTP3 = ct.HTTP3 != nil
	if p := ct.Path; p != nil {
		switch a := p.EscapedSlashesAction; a {
		case "", EscapedSlashesKeepUnchanged, EscapedSlashesRejectRequest, EscapedSlashesUnescapeAndForward, EscapedSlashesUnescapeAndRedirect:
			out.EscapedSlashes = a
		default:
			errs = append(errs, fmt.Errorf("path.escapedSlashesAction %q is not an action; use KeepUnchanged, RejectRequest, UnescapeAndForward or UnescapeAndRedirect", truncate(a)))
		}
		// Envoy Gateway merges slashes unless told not to; kubelb does so for a policy that
		// has path (without one, Envoy's default: not merged).
		out.MergeSlashes = !isTrue(p.DisableMergeSlashes)
	}
	// proxyProtocol takes precedence over the deprecated enableProxyProtocol (Envoy Gateway).
	switch {
	case ct.ProxyProtocol != nil:
		out.ProxyProtocol, out.ProxyProtocolOptional = true, isTrue(ct.ProxyProtocol.Optional)
	case isTrue(ct.EnableProxyProtocol):
		out.ProxyProtocol = true
	}
	return errs
}

// byteSize reads a size in bytes (an integer, or a quantity such as 64Ki) from lo to hi.
func byteSize(field string, v *intstr.IntOrString, lo, hi int64) (uint32, error) {
	var n int64
	if v.Type == intstr.Int {
		n = int64(v.IntVal)
	} else {
		q, err := resource.ParseQuantity(v.StrVal)
		if err != nil {
			return 0, fmt.Errorf("%s %q is not a size such as 32768 or 64Ki", field, truncate(v.StrVal))
		}
		var ok bool
		if n, ok = q.AsInt64(); !ok {
			return 0, fmt.Errorf("%s %q is not a whole number of bytes", field, truncate(v.StrVal))
		}
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%s %s is out of range; use %s to %s", field, truncate(v.String()), resource.NewQuantity(lo, resource.BinarySI), resource.NewQuantity(hi, resource.BinarySI))
	}
	return uint32(n), nil
}

// isTrue: b is set and true.
func isTrue(b *bool) bool { return b != nil && *b }
