package trafficpolicy

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/sourcerange"
)

// FuzzReadResolve feeds hostile specs through Read and Resolve: they never panic, what
// Resolve accepts stays within kubelb's bounds, and what CheckBounds lets through within the
// platform team's.
func FuzzReadResolve(f *testing.F) {
	for _, seed := range []string{
		`{"loadBalancer":{"type":"ConsistentHash","consistentHash":{"type":"Cookie","cookie":{"name":"s","ttl":"1h"},"tableSize":65537}}}`,
		`{"retry":{"numRetries":10,"retryOn":{"triggers":["5xx"],"httpStatusCodes":[503]},"perRetry":{"timeout":"1s","backOff":{"maxInterval":"1s"}}}}`,
		`{"circuitBreaker":{"maxConnections":4294967295,"maxRequestsPerConnection":1},"timeout":{"tcp":{"connectTimeout":"5m"},"http":{"requestTimeout":"0s"}}}`,
		`{"healthCheck":{"passive":{"interval":"99999h","maxEjectionPercent":101}},"rateLimit":{}}`,
		`{"retry":{"numRetries":2},"timeout":{"http":{"requestTimeout":"1m"}},"rateLimit":{"local":{"rules":[{"limit":{"requests":600,"unit":"Minute"}},{"limit":{"requests":601,"unit":"Minute"}}]}}}`,
		`{"rateLimit":{"type":"Global","global":{"rules":[{"limit":{"requests":864000,"unit":"Day"}},{"clientSelectors":[{"sourceCIDR":{"type":"Distinct","value":"0.0.0.0/0"}}],"limit":{"requests":864001,"unit":"Day"}}]}}}`,
		`{"loadBalancer":{"type":"ConsistentHash","consistentHash":{"type":"SourceIP"}},"circuitBreaker":{"maxConnections":1,"maxPendingRequests":1},"healthCheck":{"passive":{"consecutiveLocalOriginFailures":1}},"timeout":{"tcp":{"connectTimeout":"1ms"}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		spec := map[string]any{}
		if json.Unmarshal(raw, &spec) != nil {
			return
		}
		bt, err := Read("ns", "p", spec)
		if err != nil {
			return
		}
		s, err := Resolve(bt)
		if err != nil {
			return
		}
		if r := s.Retry; r != nil && (r.NumRetries > MaxRetries || len(r.Codes) > MaxRetryCodes || len(r.RetryOn) == 0 || r.PerTryTimeout > MaxRequestTimeout || r.MaxInterval > MaxRetryInterval) {
			t.Fatalf("retry out of bounds: %+v", r)
		}
		if s.ConnectTimeout < 0 || s.ConnectTimeout > MaxConnectTimeout || s.RequestTimeout > MaxRequestTimeout || s.IdleTimeout > MaxIdleTimeout ||
			(s.IdleTimeout != 0 && s.IdleTimeout < MinIdleTimeout) || s.TableSize > MaxTableSize {
			t.Fatalf("settings out of bounds: %+v", s)
		}
		if h := s.Hash; h != nil && (len(h.Header) > MaxNameLength || len(h.Cookie) > MaxNameLength) {
			t.Fatalf("hash names out of bounds: %+v", h)
		}
		if o := s.Outlier; o != nil && o.MaxEjectionPercent != nil && *o.MaxEjectionPercent > 100 {
			t.Fatalf("ejection percent %d", *o.MaxEjectionPercent)
		}
		// What a TCPRoute or a UDPRoute is served acts on connections only.
		if len(StreamUnfit("TCPRoute", s)) == 0 && (s.Retry != nil || s.RequestTimeoutSet || s.IdleTimeout > 0 || len(s.RateLimit)+len(s.GlobalRateLimit)+len(s.Compression) > 0 ||
			s.Hash != nil && !s.Hash.SourceIP) {
			t.Fatalf("HTTP settings let through on a TCPRoute: %+v", s)
		}
		if len(StreamUnfit("UDPRoute", s)) == 0 && (s.CircuitBreaker != nil || s.Outlier != nil || s.ConnectTimeout > 0 || s.Retry != nil) {
			t.Fatalf("settings other than the load balancer let through on a UDPRoute: %+v", s)
		}
		for _, kind := range StreamRouteKinds { // what a Gateway's policy gives such a route, it takes
			if unfit := StreamUnfit(kind, StreamPart(kind, s)); len(unfit) > 0 {
				t.Fatalf("%s: the part of %+v has %v", kind, s, unfit)
			}
		}
		// What the platform team's bounds let through is within them; no bounds refuse nothing.
		if err := CheckBounds(nil, s); err != nil {
			t.Fatalf("no bounds refused %+v: %v", s, err)
		}
		retries := int32(2)
		b := &Bounds{Features: []v1alpha1.TrafficPolicyFeature{v1alpha1.TrafficPolicyFeatureRetry, v1alpha1.TrafficPolicyFeatureTimeout, v1alpha1.TrafficPolicyFeatureRateLimit},
			MaxRequestsPerSecond: 10, MaxRetries: &retries, MaxRequestTimeout: time.Minute}
		if CheckBounds(b, s) != nil {
			return
		}
		if s.LoadBalancer != "" || s.CircuitBreaker != nil || s.Outlier != nil {
			t.Fatalf("a feature not allowed let through: %+v", s)
		}
		if s.Retry != nil && s.Retry.NumRetries > 2 || s.RequestTimeoutSet && (s.RequestTimeout == 0 || s.RequestTimeout > time.Minute) {
			t.Fatalf("retries or timeout over the bounds let through: %+v", s)
		}
		for _, r := range append(slices.Clone(s.RateLimit), s.GlobalRateLimit...) {
			if float64(r.Requests)/r.Interval.Seconds() > 10 {
				t.Fatalf("a rule over 10 per second let through: %+v", r)
			}
		}
	})
}

// FuzzReadResolveSecurity feeds hostile SecurityPolicy specs through ReadSecurity and
// ResolveSecurity: they never panic, and what ResolveSecurity accepts stays within kubelb's
// bounds (at most MaxClientCIDRs canonical ranges, every rule with one; a JWT provider's keys
// inline or fetched through a Service port or at an https URL's DNS name, never both, its
// remoteJWKS's bounds kept).
func FuzzReadResolveSecurity(f *testing.F) {
	for _, seed := range []string{
		`{"authorization":{"defaultAction":"Allow","rules":[{"action":"Deny","principal":{"clientCIDRs":["10.1.2.3/8","::1/128"]}}]}}`,
		`{"authorization":{"rules":[{"action":"Allow","principal":{"clientCIDRs":["010.0.0.0/8"]}},{"action":"Deny","principal":{}}]}}`,
		`{"authorization":{"defaultAction":"Maybe","rules":[{"name":"x","action":"Allow","principal":{"clientCIDRs":["fe80::1%eth0/64"],"headers":[]}}]},"jwt":{}}`,
		`{"jwt":{"providers":[{"name":"a","remoteJWKS":{"uri":"https://k.example.com/jwks","backendRefs":[{"name":"keys","port":80}],"cacheDuration":"1h","failedRefetchDuration":"5s"}}]}}`,
		`{"jwt":{"providers":[{"name":"a","remoteJWKS":{"uri":"http://[::1]:0/%","backendRefs":[{"name":"keys","port":0},{"name":"x"}],"cacheDuration":"0s"}}]}}`,
		`{"jwt":{"providers":[{"name":"a","remoteJWKS":{"uri":"https://k/jwks"},"localJWKS":{"inline":"{}"}}]}}`,
		`{"jwt":{"providers":[{"name":"a","remoteJWKS":{"uri":"https://keys.example.com:8443/jwks","cacheDuration":"10m"}}]}}`,
		`{"jwt":{"providers":[{"name":"a","remoteJWKS":{"uri":"https://127.0.0.1/jwks"}},{"name":"b","remoteJWKS":{"uri":"http://keys.example.com/jwks"}}]}}`,
		`{"oidc":{"provider":{"issuer":"https://id.example.com/realms/a","backendRefs":[{"name":"idp","port":80}]},"clientID":"c","clientSecret":{"name":"s"}}}`,
		`{"oidc":{"provider":{"issuer":"https://id.example.com","tokenEndpoint":"https://id/t","backendRefs":[{"name":"idp","port":80}]},"clientID":"c","clientSecret":{"name":"s"}}}`,
		`{"oidc":{"provider":{"issuer":"https://id","authorizationEndpoint":"https://id/a","tokenEndpoint":"https://id/t","backendRefs":[{"name":"idp","port":80}]},"clientID":"c","clientSecret":{"name":"s"},"passThroughAuthHeader":true,"cookieConfig":{"sameSite":"Lax"},"defaultTokenTTL":"1h","csrfTokenTTL":"10m","denyRedirect":{"headers":[{"name":"Accept","type":"RegularExpression","value":"^a.*"}]}},"jwt":{"providers":[{"name":"a","localJWKS":{"inline":"{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"}]}"}}]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		spec := map[string]any{}
		if json.Unmarshal(raw, &spec) != nil {
			return
		}
		sec, err := ReadSecurity("ns", "p", spec)
		if err != nil {
			return
		}
		settings, err := ResolveSecurity(sec)
		if err == nil && settings.JWT != nil {
			for _, p := range settings.JWT.Providers {
				r := p.Remote
				if (r == nil) == (p.JWKS == "") {
					t.Fatalf("provider %s: keys %q and remote %+v, want exactly one", p.Name, p.JWKS, r)
				}
				if r != nil && ((r.Service == "") == (r.Host == "") || (r.Service != "" && r.Port < 1) || (r.Host != "" && (r.HostPort < 1 || !strings.HasPrefix(r.URI, "https://"))) || len(r.URI) > MaxJWKSURI || r.CacheDuration < MinJWKSCacheDuration ||
					r.CacheDuration > MaxJWKSCacheDuration || r.FailedRefetch < MinJWKSFailedRefetch || r.FailedRefetch > MaxJWKSFailedRefetch) {
					t.Fatalf("remoteJWKS out of bounds let through: %+v", r)
				}
			}
		}
		if err == nil && settings.OIDC != nil && len(settings.OIDC.PassThrough) > 0 && (settings.JWT == nil || settings.JWT.Optional) {
			t.Fatalf("oidc passes requests through without a jwt to verify them: %+v", settings)
		}
		if err != nil || settings.Authorization == nil {
			return
		}
		a := settings.Authorization
		total := 0
		for _, r := range a.Rules {
			if len(r.Ranges) == 0 {
				t.Fatalf("a rule without ranges: %+v", a)
			}
			if err := sourcerange.Valid(r.Ranges); err != nil {
				t.Fatalf("ranges %v: %v", r.Ranges, err)
			}
			total += len(r.Ranges)
		}
		if total > MaxClientCIDRs {
			t.Fatalf("%d ranges", total)
		}
	})
}

// FuzzReadResolveClient feeds hostile ClientTrafficPolicy specs through ReadClient and
// ResolveClient: they never panic, and what ResolveClient accepts stays within kubelb's
// bounds.
func FuzzReadResolveClient(f *testing.F) {
	for _, seed := range []string{
		`{"timeout":{"http":{"requestReceivedTimeout":"10s","idleTimeout":"1h"}},"headers":{"withUnderscoresAction":"DropHeader"}}`,
		`{"timeout":{"http":{"requestReceivedTimeout":"0s","idleTimeout":"99999h"},"tcp":{}},"headers":{"withUnderscoresAction":"x"}}`,
		`{"connection":{"connectionLimit":{"value":-1,"closeDelay":"99999h"},"maxAcceptPerSocketEvent":4294967295}}`,
		`{"clientIPDetection":{"xForwardedFor":{"numTrustedHops":-2147483648},"customHeader":{"name":"x\r\ny"}}}`,
		`{"clientIPDetection":{"xForwardedFor":{"trustedCIDRs":["10.0.0.0/8","::/0","1.2.3.4/33",""]}}}`,
		`{"clientIPDetection":{"customHeader":{"name":"X-Real-IP","failClosed":true}}}`,
		`{"tls":{"minVersion":"1.3","maxVersion":"1.2","ciphers":["AES128-SHA:x"],"ecdhCurves":["X25519"],"alpnProtocols":["h2","h3"]}}`,
		`{"timeout":{"tcp":{"idleTimeout":"99999h"}},"tcpKeepalive":{"probes":-1,"idleTime":"1500ms","interval":"0s"}}`,
		`{"connection":{"bufferLimit":"9Ei"},"http2":{"initialStreamWindowSize":"-1","initialConnectionWindowSize":4294967296,"maxConcurrentStreams":2147483648,"onInvalidMessage":"x"}}`,
		`{"connection":{"bufferLimit":"1e3"},"http1":{"enableTrailers":true,"preserveHeaderCase":true,"http10":{"useDefaultHost":true}},"path":{"escapedSlashesAction":"RejectRequest","disableMergeSlashes":false}}`,
		`{"enableProxyProtocol":true,"proxyProtocol":{"optional":true},"headers":{"preserveXRequestID":true}}`,
		`{"timeout":{"http":{"requestHeadersReceivedTimeout":"99999h","streamIdleTimeout":"0s"},"tcp":{"tlsHandshakeTimeout":"1ms"}}}`,
		`{"connection":{"connectionLimit":{"value":1,"maxConnectionDuration":"25h","maxRequestsPerConnection":-1,"maxStreamDuration":"0s"}}}`,
		`{"tls":{"clientValidation":{"caCertificateRefs":[{"kind":"Service","name":"x"},{"name":"../a","namespace":"other"},{"group":"core","kind":"ConfigMap","name":"ca"}],"optional":true,"mode":"Request"}}}`,
		`{"clientIPDetection":{"directSourceIP":{},"xForwardedFor":{"numTrustedHops":1}}}`,
		`{"headers":{"enableEnvoyHeaders":false},"tls":{"session":{"resumption":{"stateless":{},"stateful":{"x":1}}}}}`,
		`{"http3":{},"tls":{"maxVersion":"1.2"},"proxyProtocol":{}}`,
		`{"http3":{"allowAltSvc":true},"http2":{}}`,
		`{"http3":null}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		spec := map[string]any{}
		if json.Unmarshal(raw, &spec) != nil {
			return
		}
		ct, err := ReadClient("ns", "p", spec)
		if err != nil {
			return
		}
		s, err := ResolveClient(ct)
		if err != nil {
			return
		}
		for _, d := range []struct{ v, max time.Duration }{{s.RequestReceivedTimeout, MaxRequestReceivedTimeout}, {s.IdleTimeout, MaxClientIdleTimeout}} {
			if d.v != 0 && (d.v < MinClientTimeout || d.v > d.max) {
				t.Fatalf("settings out of bounds: %+v", s)
			}
		}
		for _, d := range []struct{ v, max time.Duration }{{s.RequestHeadersTimeout, MaxRequestHeadersTimeout}, {s.StreamIdleTimeout, MaxClientStreamIdleTimeout},
			{s.MaxConnectionDuration, MaxConnectionDuration}, {s.MaxStreamDuration, MaxStreamDuration}, {s.TLSHandshakeTimeout, MaxTLSHandshakeTimeout}} {
			if d.v != 0 && (d.v < MinClientTimeout || d.v > d.max) {
				t.Fatalf("a timeout out of bounds: %+v", s)
			}
		}
		if s.MaxRequestsPerConnection > MaxRequestsPerConnection {
			t.Fatalf("requests per connection out of bounds: %+v", s)
		}
		if s.TLS != nil && s.TLS.ClientValidation != nil {
			v := s.TLS.ClientValidation
			if len(v.Refs) == 0 || len(v.Refs) > MaxClientCARefs {
				t.Fatalf("client validation refs out of bounds: %+v", v)
			}
			for _, r := range v.Refs {
				if (r.Kind != "ConfigMap" && r.Kind != "Secret") || len(validation.IsDNS1123Subdomain(r.Name)) > 0 {
					t.Fatalf("client validation ref %+v", r)
				}
			}
		}
		if s.TCPIdleTimeout != 0 && (s.TCPIdleTimeout < MinClientTimeout || s.TCPIdleTimeout > MaxTCPIdleTimeout) {
			t.Fatalf("tcp idle timeout out of bounds: %+v", s)
		}
		if k := s.Keepalive; k != nil && (k.Probes > MaxKeepaliveProbes || k.IdleTime > MaxKeepaliveTime || k.Interval > MaxKeepaliveTime || k.IdleTime%time.Second != 0 || k.Interval%time.Second != 0 ||
			(k.IdleTime != 0 && k.IdleTime < time.Second) || (k.Interval != 0 && k.Interval < time.Second)) {
			t.Fatalf("keepalive out of bounds: %+v", k)
		}
		if s.BufferLimit != 0 && (s.BufferLimit < MinBufferLimit || s.BufferLimit > MaxBufferLimit) {
			t.Fatalf("buffer limit out of bounds: %+v", s)
		}
		if h := s.HTTP2; h != nil {
			for _, w := range []struct{ v, max uint32 }{{h.InitialStreamWindowSize, MaxHTTP2StreamWindow}, {h.InitialConnectionWindowSize, MaxHTTP2ConnectionWindow}} {
				if w.v != 0 && (w.v < MinHTTP2Window || w.v > w.max) {
					t.Fatalf("http2 window out of bounds: %+v", h)
				}
			}
			if h.MaxConcurrentStreams > MaxHTTP2ConcurrentStreams {
				t.Fatalf("http2 streams out of bounds: %+v", h)
			}
		}
		if s.ConnectionLimit > MaxConnectionLimit || s.CloseDelay < 0 || s.CloseDelay > MaxCloseDelay || s.MaxAcceptPerSocketEvent > MaxAcceptPerSocketEvent {
			t.Fatalf("connection settings out of bounds: %+v", s)
		}
		if s.XFFTrustedHops > MaxTrustedHops || len(s.ClientIPHeader) > MaxClientIPHeaderLength || (s.ClientIPHeader != "" && !ipHeaderNameRE.MatchString(s.ClientIPHeader)) ||
			(s.ClientIPHeader != "" && s.XFFTrustedHops > 0) || (s.ClientIPHeaderFailClosed && s.ClientIPHeader == "") {
			t.Fatalf("client address settings out of bounds: %+v", s)
		}
		if c := s.TLS; c != nil {
			for _, l := range []struct{ got, known []string }{{c.Ciphers, TLSCiphers}, {c.ECDHCurves, TLSCurves}, {c.SignatureAlgorithms, TLSSignatureAlgorithms}, {c.ALPN, TLSALPN}} {
				if len(l.got) > MaxTLSListEntries {
					t.Fatalf("a tls list too long: %+v", c)
				}
				for _, v := range l.got {
					if !slices.Contains(l.known, v) {
						t.Fatalf("an unknown tls name %q: %+v", v, c)
					}
				}
			}
			for _, v := range []string{c.MinVersion, c.MaxVersion} {
				if v != "" && v != "1.2" && v != "1.3" {
					t.Fatalf("tls version %q", v)
				}
			}
		}
		switch s.WithUnderscores {
		case "", UnderscoresAllow, UnderscoresRejectRequest, UnderscoresDropHeader:
		default:
			t.Fatalf("action %q", s.WithUnderscores)
		}
	})
}
