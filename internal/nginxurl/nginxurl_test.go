package nginxurl

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestParse: the in-cluster names of a Service of the Ingress's namespace are read, with
// their port (the scheme's by default); another namespace, an address, another host, a user,
// a query or nginx variables in the path are refused, saying what kubelb accepts.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want Service
		bad  string // part of the message when refused
	}{
		{raw: "http://copy/$request_uri", want: Service{Name: "copy", Port: 80, Host: "copy", Path: "/", RequestURI: true}},
		{raw: "http://copy.shop:8080$request_uri", want: Service{Name: "copy", Port: 8080, Host: "copy.shop", RequestURI: true}},
		{raw: " https://Copy.shop.svc/ ", want: Service{Name: "copy", Port: 443, TLS: true, Host: "copy.shop.svc", Path: "/"}},
		{raw: "http://auth.shop.svc.cluster.local:9000/check", want: Service{Name: "auth", Port: 9000, Host: "auth.shop.svc.cluster.local", Path: "/check"}},
		{raw: "http://copy.other/$request_uri", bad: "namespace shop"},
		{raw: "http://copy.shop.svc.example.com/", bad: "namespace shop"},
		{raw: "http://10.0.0.1/$request_uri", bad: "no Service name"},
		{raw: "http://[::1]:80/", bad: "no Service name"},
		{raw: "http://metadata.google.internal/", bad: "namespace shop"},
		{raw: "ftp://copy/", bad: "http or https"},
		{raw: "copy/$request_uri", bad: "absolute URL"},
		{raw: "http://u:p@copy/", bad: "without user"},
		{raw: "http://copy/?a=b", bad: "without user, query"},
		{raw: "http://copy:0/", bad: "port from 1"},
		{raw: "http://copy:99999/", bad: "port from 1"},
		{raw: "http://copy/$host", bad: "without nginx variables"},
		{raw: "http://copy/a\x01", bad: "absolute URL"},
		{raw: "http://copy/a b", want: Service{Name: "copy", Port: 80, Host: "copy", Path: "/a%20b"}},
		{raw: "http://" + strings.Repeat("a", MaxLen) + "/", bad: "at most 1024 bytes"},
	} {
		got, msg := Parse(tc.raw, "shop")
		switch {
		case tc.bad != "" && !strings.Contains(msg, tc.bad):
			t.Errorf("Parse(%q): %q, want a message with %q", tc.raw, msg, tc.bad)
		case tc.bad == "" && (msg != "" || got != tc.want):
			t.Errorf("Parse(%q) = %+v, %q; want %+v", tc.raw, got, msg, tc.want)
		}
	}
}

// TestMirror: mirror-target copies each request with its own path and query, so only a URL
// ending in $request_uri (after the host, or after /) is read.
func TestMirror(t *testing.T) {
	for raw, ok := range map[string]bool{
		"http://copy/$request_uri":          true,
		"http://copy.shop:8080$request_uri": true,
		"http://copy/":                      false, // nginx would send every copy to /
		"http://copy":                       false,
		"http://copy/v2/$request_uri":       false,
		"http://copy.other/$request_uri":    false,
	} {
		if _, msg := Mirror(raw, "shop"); (msg == "") != ok {
			t.Errorf("Mirror(%q): %q, want accepted %v", raw, msg, ok)
		}
	}
	got := Services(map[string]string{Prefix + MirrorTarget: "http://copy.shop/$request_uri", Prefix + "other": "http://x/"}, "shop")
	if len(got) != 1 || got[0] != "copy" {
		t.Errorf("Services = %v, want [copy]", got)
	}
	if got := Services(map[string]string{Prefix + MirrorTarget: "http://copy.other/$request_uri"}, "shop"); len(got) != 0 {
		t.Errorf("Services of another namespace's mirror = %v, want none", got)
	}
}

// TestAuth: auth-url asks the service at the URL's path ("/" without one), so $request_uri is
// refused; Services lists the Services of both annotations once, sorted.
func TestAuth(t *testing.T) {
	if s, msg := Auth("http://auth.shop:9000/oauth2/auth", "shop"); msg != "" || s.Name != "auth" || s.Port != 9000 || s.Path != "/oauth2/auth" {
		t.Errorf("Auth = %+v, %q", s, msg)
	}
	if s, msg := Auth("http://auth", "shop"); msg != "" || s.Path != "/" {
		t.Errorf("Auth without a path = %+v, %q", s, msg)
	}
	if _, msg := Auth("http://auth/$request_uri", "shop"); !strings.Contains(msg, "leave $request_uri out") {
		t.Errorf("Auth with $request_uri: %q", msg)
	}
	got := Services(map[string]string{Prefix + MirrorTarget: "http://copy/$request_uri", Prefix + AuthURL: "http://auth.shop.svc/check"}, "shop")
	if strings.Join(got, ",") != "auth,copy" {
		t.Errorf("Services = %v, want [auth copy]", got)
	}
}

// FuzzParse: whatever the URL, Parse does not panic, and what it accepts names a Service of
// the namespace by a valid name and port.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"http://copy/$request_uri", "https://a.shop.svc.cluster.local:1/x", "http://a.b/", "http://[::1]/", "http://a/%zz", "http://a:/", "http://a/$request_uri$request_uri", "//a/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		s, msg := Parse(raw, "shop")
		if msg != "" {
			return
		}
		if len(validation.IsDNS1035Label(s.Name)) > 0 || s.Port < 1 || s.Port > 65535 || strings.Contains(s.Path, "$") {
			t.Errorf("Parse(%q) accepted %+v", raw, s)
		}
	})
}
