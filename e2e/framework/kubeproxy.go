package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"kubelb.dev/kubelb/api/v1alpha1"
	"kubelb.dev/kubelb/internal/testenv"
)

// PlayKubeProxy plays kube-proxy on the tenant's nodes: every NodePort of every Service
// listens on each node address and forwards each TCP connection, or each UDP flow (a client
// address: udpForwarder), to one of the Service's ready endpoints (round robin), read from the
// EndpointSlices kube-controller-manager maintains. It follows Services, EndpointSlices and
// Nodes until the test ends.
//
// A Service with externalTrafficPolicy Local is served as kube-proxy serves it: a node's
// NodePort forwards only to the endpoints on that node (an EndpointSlice endpoint's nodeName,
// which kube-controller-manager copies from the Pod), and a node without one refuses the
// connection (kube-proxy drops it; either way the client gets nothing). Each node also
// answers kube-proxy's health check on the Service's healthCheckNodePort: any path, 200 with
// {"service":{"namespace":..,"name":..},"localEndpoints":n,"serviceProxyHealthy":true} while
// the node has n > 0 ready local endpoints, 503 with n = 0 otherwise. A node address is
// matched to its Node by the Node's addresses.
func PlayKubeProxy(t testenv.TB, c client.Client, nodeIPs []string) {
	fs := forwarders{}
	hs := healthServers{}
	t.Cleanup(fs.closeAll)
	t.Cleanup(hs.closeAll)
	log := newOnceLogger(t)
	Every(t, PlayInterval, func(ctx context.Context) bool {
		if want, health, err := kubeProxyState(ctx, c, nodeIPs); err == nil {
			for _, err := range fs.sync(want) {
				log.Logf("kube-proxy: %v", err)
			}
			for _, err := range hs.sync(health) {
				log.Logf("kube-proxy health check: %v", err)
			}
		}
		return false
	})
}

// endpoint is a ready endpoint address:port and the node it runs on.
type endpoint struct {
	addr string
	node string
}

// serviceHealth is what kube-proxy's health check of one Service answers on one node.
type serviceHealth struct {
	namespace, name string
	localEndpoints  int
}

// kubeProxyState maps node-address:NodePort to the endpoints a connection there may reach,
// and node-address:healthCheckNodePort to the health of the Service on that node.
func kubeProxyState(ctx context.Context, c client.Client, nodeIPs []string) (map[string][]string, map[string]serviceHealth, error) {
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs); err != nil {
		return nil, nil, err
	}
	var slices discoveryv1.EndpointSliceList
	if err := c.List(ctx, &slices); err != nil {
		return nil, nil, err
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, nil, err
	}
	nodeOf := map[string]string{} // node address → Node name
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
				nodeOf[a.Address] = n.Name
			}
		}
	}
	byService := map[string][]*discoveryv1.EndpointSlice{}
	for i := range slices.Items {
		s := &slices.Items[i]
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		key := s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
		byService[key] = append(byService[key], s)
	}
	want := map[string][]string{}
	health := map[string]serviceHealth{}
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal &&
			(svc.Spec.Type == corev1.ServiceTypeLoadBalancer || svc.Spec.Type == corev1.ServiceTypeNodePort)
		slices := byService[svc.Namespace+"/"+svc.Name]
		for _, p := range svc.Spec.Ports {
			proto := v1alpha1.ProtocolOrTCP(p.Protocol)
			if p.NodePort == 0 || (proto != corev1.ProtocolTCP && proto != corev1.ProtocolUDP) {
				continue
			}
			eps := readyEndpoints(slices, p.Name)
			for _, ip := range nodeIPs {
				addr := net.JoinHostPort(ip, fmt.Sprint(p.NodePort))
				if proto == corev1.ProtocolUDP {
					addr = udpKey(addr)
				}
				want[addr] = []string{}
				for _, ep := range eps {
					if !local || (ep.node != "" && ep.node == nodeOf[ip]) {
						want[addr] = append(want[addr], ep.addr)
					}
				}
			}
		}
		if !local || svc.Spec.HealthCheckNodePort == 0 {
			continue
		}
		// kube-proxy counts a Service's local endpoints, not its ports' (the first port's
		// endpoints are the Service's Pods).
		var eps []endpoint
		if len(svc.Spec.Ports) > 0 {
			eps = readyEndpoints(slices, svc.Spec.Ports[0].Name)
		}
		for _, ip := range nodeIPs {
			h := serviceHealth{namespace: svc.Namespace, name: svc.Name}
			for _, ep := range eps {
				if ep.node != "" && ep.node == nodeOf[ip] {
					h.localEndpoints++
				}
			}
			health[net.JoinHostPort(ip, fmt.Sprint(svc.Spec.HealthCheckNodePort))] = h
		}
	}
	return want, health, nil
}

// readyEndpoints lists the ready endpoints of a Service port (by name) in its EndpointSlices.
func readyEndpoints(slices []*discoveryv1.EndpointSlice, portName string) []endpoint {
	var out []endpoint
	for _, s := range slices {
		for _, sp := range s.Ports {
			if sp.Port == nil || (sp.Name != nil && *sp.Name != portName) || (sp.Name == nil && portName != "") {
				continue
			}
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
					continue
				}
				node := ""
				if ep.NodeName != nil {
					node = *ep.NodeName
				}
				for _, a := range ep.Addresses {
					out = append(out, endpoint{addr: net.JoinHostPort(a, fmt.Sprint(*sp.Port)), node: node})
				}
			}
		}
	}
	return out
}

// healthServer plays kube-proxy's health check server of one Service on one node.
type healthServer struct {
	state atomic.Pointer[serviceHealth]
	srv   *http.Server
	done  chan struct{}
}

func serveHealth(addr string, h serviceHealth) (*healthServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &healthServer{done: make(chan struct{})}
	s.state.Store(&h)
	// kube-proxy answers on every path of the port, not only /healthz.
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(l) // ends with ErrServerClosed when the Service or the test goes
	}()
	return s, nil
}

func (s *healthServer) serveHTTP(w http.ResponseWriter, _ *http.Request) {
	h := s.state.Load()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", fmt.Sprint(h.localEndpoints))
	if h.localEndpoints == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(HealthCheckReply{
		Service:        HealthCheckService{Namespace: h.namespace, Name: h.name},
		LocalEndpoints: h.localEndpoints, ServiceProxyHealthy: true,
	})
}

// HealthCheckReply is the body of kube-proxy's answer on a healthCheckNodePort.
type HealthCheckReply struct {
	Service             HealthCheckService `json:"service"`
	LocalEndpoints      int                `json:"localEndpoints"`
	ServiceProxyHealthy bool               `json:"serviceProxyHealthy"`
}

// HealthCheckService names the Service a health check answer is about.
type HealthCheckService struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (s *healthServer) close() {
	_ = s.srv.Close()
	<-s.done
}

// healthServers keeps one healthServer per listen address in line with a desired set.
type healthServers struct {
	mu      sync.Mutex
	servers map[string]*healthServer
}

// sync makes the running health servers match want (listen address → health): new ones
// start, changed ones answer the new health, gone ones close. It returns the listen errors.
func (hs *healthServers) sync(want map[string]serviceHealth) []error {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.servers == nil {
		hs.servers = map[string]*healthServer{}
	}
	var errs []error
	for addr, s := range hs.servers {
		if _, ok := want[addr]; !ok {
			s.close()
			delete(hs.servers, addr)
		}
	}
	for addr, h := range want {
		if s, ok := hs.servers[addr]; ok {
			s.state.Store(&h)
			continue
		}
		s, err := serveHealth(addr, h)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		hs.servers[addr] = s
	}
	return errs
}

func (hs *healthServers) closeAll() { hs.sync(nil) }

// PlayLoadBalancerAddresses plays kube-proxy's handling of load balancer addresses and
// external IPs in a cluster whose backends the harness runs on the nodes' NodePorts (they
// stand for the Service's endpoints, see Tenant.StartBackends): every TCP port of a Service
// of type LoadBalancer whose status.loadBalancer.ingress has an IP with ipMode VIP (or none),
// and of a Service with NodePorts on each of its spec.externalIPs, listens on <ip>:<port> and
// forwards each connection to one of <node address>:<nodePort> (round robin over nodeIPs), as
// kube-proxy's rules send a packet for that address to the Service's endpoints. A Service
// without NodePorts (a ClusterIP Service with externalIPs, such as a 1:1 NAT shadow Service)
// reaches the endpoints through the NodePorts of a Service of its namespace with the same
// selector and port: the same Pods, which the harness plays on those NodePorts. An ipMode
// Proxy address is not programmed (kube-proxy leaves it to the load balancer). Only loopback
// addresses are listened on, and in the test's private network namespace its local range
// (10.244.0.0/15, see SetupNetns). It follows the Services until the test ends.
func PlayLoadBalancerAddresses(t testenv.TB, c client.Client, nodeIPs []string) {
	fs := forwarders{}
	t.Cleanup(fs.closeAll)
	log := newOnceLogger(t)
	Every(t, PlayInterval, func(ctx context.Context) bool {
		var svcs corev1.ServiceList
		if err := c.List(ctx, &svcs); err != nil {
			return false
		}
		for _, err := range fs.sync(loadBalancerAddressState(svcs.Items, nodeIPs)) {
			log.Logf("kube-proxy (load balancer addresses): %v", err)
		}
		return false
	})
}

// loadBalancerAddressState maps <load balancer or external IP>:<port> to the node
// addresses:NodePort a connection there may reach (see PlayLoadBalancerAddresses).
func loadBalancerAddressState(svcs []corev1.Service, nodeIPs []string) map[string][]string {
	want := map[string][]string{}
	for i := range svcs {
		svc := &svcs[i]
		ips := append([]string(nil), svc.Spec.ExternalIPs...)
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			for _, in := range svc.Status.LoadBalancer.Ingress {
				if in.IPMode == nil || *in.IPMode == corev1.LoadBalancerIPModeVIP {
					ips = append(ips, in.IP)
				}
			}
		}
		for _, ip := range ips {
			if a, err := netip.ParseAddr(ip); err != nil || !listenable(a) {
				continue
			}
			for _, p := range svc.Spec.Ports {
				nodePort := p.NodePort
				if nodePort == 0 {
					nodePort = sameEndpointsNodePort(svcs, svc, p)
				}
				if p.Protocol != corev1.ProtocolTCP || nodePort == 0 {
					continue
				}
				var ups []string
				for _, n := range nodeIPs {
					ups = append(ups, net.JoinHostPort(n, fmt.Sprint(nodePort)))
				}
				want[net.JoinHostPort(ip, fmt.Sprint(p.Port))] = ups
			}
		}
	}
	return want
}

// sameEndpointsNodePort is the NodePort of port p of another Service of svc's namespace with
// the same (non-empty) selector, whose endpoints are therefore the same Pods; 0 when there is
// none.
func sameEndpointsNodePort(svcs []corev1.Service, svc *corev1.Service, p corev1.ServicePort) int32 {
	if len(svc.Spec.Selector) == 0 {
		return 0
	}
	for i := range svcs {
		o := &svcs[i]
		if o.Namespace != svc.Namespace || o.Name == svc.Name || !maps.Equal(o.Spec.Selector, svc.Spec.Selector) {
			continue
		}
		for _, op := range o.Spec.Ports {
			if op.Port == p.Port && op.Protocol == p.Protocol && op.NodePort != 0 {
				return op.NodePort
			}
		}
	}
	return 0
}

// netnsLocal is the range SetupNetns makes local in the test's private network namespace.
var netnsLocal = netip.MustParsePrefix("10.244.0.0/15")

// listenable tells whether the played kube-proxy may listen on a: a loopback address, or one
// of the private network namespace's local range when the test runs in it.
func listenable(a netip.Addr) bool {
	return a.IsLoopback() || (os.Getenv(InNetnsEnv) != "" && netnsLocal.Contains(a))
}
