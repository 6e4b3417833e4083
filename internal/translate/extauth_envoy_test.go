package translate_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testsupport"
	"kubelb.dev/kubelb/internal/translate"
)

// The authorization services of these tests decide by the client's X-Tenant header: "good" is
// allowed (the answer carries X-User: the user and X-Secret, which is not copied on),
// "stranger" is refused with 401, anything else with 403.

// extAuthBackend answers 200, telling in headers what reached it: X-User and X-Secret.
func extAuthBackend(int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Saw-User", r.Header.Get("X-User"))
		w.Header().Set("X-Saw-Secret", r.Header.Get("X-Secret"))
	})
}

// extAuthInput is trafficInput whose HTTPRoute carries a SecurityPolicy with extAuth e, and
// the authorization Service auth (port 8080) on authPort of every node.
func extAuthInput(t *testing.T, tenant string, nodePort, authPort int, e *v1alpha1.SecurityExtAuth) (translate.Input, int) {
	in, httpPort := trafficInput(t, tenant, nodePort, nil)
	src := in.Routes[1].Spec.Source.Kubernetes
	src.Context = &v1alpha1.SourceContext{Security: &v1alpha1.Security{Namespace: "shop", Name: "auth", ExtAuth: e}}
	src.Services = append(src.Services, v1alpha1.UpstreamService{Service: corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "auth-nodeport", Namespace: "shop", Labels: map[string]string{v1alpha1.LabelOriginName: "auth", v1alpha1.LabelOriginNamespace: "shop"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Name: "auth", Port: 8080, NodePort: int32(authPort)}}},
	}})
	return in, httpPort
}

// listenOnNodes listens on one free port of every traffic node.
func listenOnNodes(t *testing.T) (int, []net.Listener) {
	t.Helper()
	port := testsupport.FreePort(t, trafficNodes...)
	var out []net.Listener
	for _, ip := range trafficNodes {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return port, out
}

// extAuthCase is one kind of request and what the client must get.
type extAuthCase struct {
	name, tenant, forgedUser string
	want                     int
	wantUser                 string
}

var extAuthCases = []extAuthCase{
	{name: "no tenant", want: http.StatusForbidden},
	{name: "another tenant", tenant: "bad", want: http.StatusForbidden},
	{name: "a stranger", tenant: "stranger", want: http.StatusUnauthorized},
	{name: "allowed", tenant: "good", want: http.StatusOK, wantUser: "alice"},
	{name: "allowed, a forged X-User replaced", tenant: "good", forgedUser: "mallory", want: http.StatusOK, wantUser: "alice"},
}

// runExtAuthCases sends each case twice and returns the requests refused and served.
func runExtAuthCases(t *testing.T, addr string, cases []extAuthCase) (refused, served int) {
	t.Helper()
	for _, c := range cases {
		for range 2 {
			var headers []string
			if c.tenant != "" {
				headers = append(headers, "X-Tenant", c.tenant)
			}
			if c.forgedUser != "" {
				headers = append(headers, "X-User", c.forgedUser)
			}
			resp, err := trafficGet(addr, headers...)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			switch {
			case resp.StatusCode != c.want:
				t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
			case resp.StatusCode != http.StatusOK:
				refused++
			default:
				served++
				if got := resp.Header.Get("X-Saw-User"); got != c.wantUser {
					t.Errorf("%s: the backend saw X-User %q, want %q", c.name, got, c.wantUser)
				}
				if got := resp.Header.Get("X-Saw-Secret"); got != "" {
					t.Errorf("%s: the backend saw X-Secret %q of the authorization answer, which headersToBackend does not name", c.name, got)
				}
			}
		}
	}
	return refused, served
}

// TestHTTPExtAuthThroughEnvoy: an HTTPRoute's SecurityPolicy with extAuth.http (Service auth,
// path /check, headersToExtAuth X-Tenant, headersToBackend X-User) makes a real Envoy ask a
// real HTTP authorization server on the tenant's nodes about each request: its refusals (401,
// 403) reach the client, its allowed requests reach the backend with X-User of its answer (a
// client's own X-User replaced) and without its other headers; the server sees the paths
// under /check. With the server down the requests are refused (403, failOpen unset).
func TestHTTPExtAuthThroughEnvoy(t *testing.T) {
	const tenant = "tenant-ext-auth-http"
	nodePort := serveOnNodes(t, extAuthBackend)
	authPort, listeners := listenOnNodes(t)
	var mu sync.Mutex
	paths := map[string]int{}
	var servers []*http.Server
	for _, l := range listeners {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			paths[r.URL.Path]++
			mu.Unlock()
			switch r.Header.Get("X-Tenant") {
			case "good":
				w.Header().Set("X-User", "alice")
				w.Header().Set("X-Secret", "internal")
			case "stranger":
				w.WriteHeader(http.StatusUnauthorized)
			default:
				w.WriteHeader(http.StatusForbidden)
			}
		})}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { srv.Close() })
		servers = append(servers, srv)
	}
	in, httpPort := extAuthInput(t, tenant, nodePort, authPort, &v1alpha1.SecurityExtAuth{
		HTTP: &v1alpha1.SecurityExtAuthHTTP{
			BackendRefs:      []v1alpha1.SecurityBackendRef{{Name: "auth", Port: ptr.To[int32](8080)}},
			Path:             "/check",
			HeadersToBackend: []string{"X-User"},
		},
		HeadersToExtAuth: []string{"X-Tenant"},
	})
	addr := serveThroughEnvoy(t, tenant, in, httpPort)
	refused, served := runExtAuthCases(t, addr, extAuthCases)
	t.Logf("%d requests refused, %d served; the authorization server saw %v", refused, served, paths)
	if refused != 6 || served != 4 {
		t.Errorf("%d refused and %d served, want 6 and 4", refused, served)
	}
	mu.Lock()
	for p := range paths {
		if !strings.HasPrefix(p, "/check/") {
			t.Errorf("the authorization server saw path %q, want it under /check", p)
		}
	}
	mu.Unlock()

	for _, s := range servers {
		s.Close()
	}
	refused, served = runExtAuthCases(t, addr, []extAuthCase{{name: "allowed, the service down", tenant: "good", want: http.StatusForbidden}})
	if refused != 2 || served != 0 {
		t.Errorf("with the authorization service down: %d refused and %d served, want 2 and 0", refused, served)
	}
}

// grpcAuth is a real envoy.service.auth.v3.Authorization server.
type grpcAuth struct{}

func (grpcAuth) Check(_ context.Context, r *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	deny := func(code codes.Code, status typev3.StatusCode) *authv3.CheckResponse {
		return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(code)},
			HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{Status: &typev3.HttpStatus{Code: status}}}}
	}
	switch r.GetAttributes().GetRequest().GetHttp().GetHeaders()["x-tenant"] {
	case "good":
		return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.OK)},
			HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{
				{Header: &corev3.HeaderValue{Key: "x-user", Value: "alice"}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}}}}}, nil
	case "stranger":
		return deny(codes.Unauthenticated, typev3.StatusCode_Unauthorized), nil
	default:
		return deny(codes.PermissionDenied, typev3.StatusCode_Forbidden), nil
	}
}

// TestGRPCExtAuthThroughEnvoy: an HTTPRoute's SecurityPolicy with extAuth.grpc (Service auth)
// and failOpen makes a real Envoy ask a real gRPC Authorization server (go-control-plane's
// envoy.service.auth.v3) on the tenant's nodes over HTTP/2: its refusals (401, 403) reach the
// client, its allowed requests reach the backend with the X-User it sets. With the server down
// the requests are served (failOpen), without X-User.
func TestGRPCExtAuthThroughEnvoy(t *testing.T) {
	const tenant = "tenant-ext-auth-grpc"
	nodePort := serveOnNodes(t, extAuthBackend)
	authPort, listeners := listenOnNodes(t)
	var servers []*grpc.Server
	for _, l := range listeners {
		srv := grpc.NewServer()
		authv3.RegisterAuthorizationServer(srv, grpcAuth{})
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(srv.Stop)
		servers = append(servers, srv)
	}
	in, httpPort := extAuthInput(t, tenant, nodePort, authPort, &v1alpha1.SecurityExtAuth{
		GRPC:             &v1alpha1.SecurityExtAuthGRPC{BackendRefs: []v1alpha1.SecurityBackendRef{{Name: "auth", Port: ptr.To[int32](8080)}}},
		HeadersToExtAuth: []string{"X-Tenant"},
		FailOpen:         ptr.To(true),
	})
	addr := serveThroughEnvoy(t, tenant, in, httpPort)
	refused, served := runExtAuthCases(t, addr, extAuthCases)
	t.Logf("%d requests refused, %d served", refused, served)
	if refused != 6 || served != 4 {
		t.Errorf("%d refused and %d served, want 6 and 4", refused, served)
	}

	for _, s := range servers {
		s.Stop()
	}
	refused, served = runExtAuthCases(t, addr, []extAuthCase{
		{name: "allowed, the service down", tenant: "good", want: http.StatusOK},
		{name: "another tenant, the service down", tenant: "bad", want: http.StatusOK},
	})
	if refused != 0 || served != 4 {
		t.Errorf("with the authorization service down and failOpen: %d refused and %d served, want 0 and 4", refused, served)
	}
}
