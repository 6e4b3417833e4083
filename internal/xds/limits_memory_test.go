package xds

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"kubelb.dev/kubelb/internal/pki"
	"kubelb.dev/kubelb/internal/xds/xdstest"
)

// The attacker of TestXDSStreamFloodMemory runs in a process of its own (this test binary,
// TestXDSAttackerProcess), so that the server's heap is measured without the client's.
const (
	attackerEnv      = "KUBELB_XDS_ATTACKER" // the server's address
	attackerDirEnv   = "KUBELB_XDS_ATTACKER_DIR"
	attackerShapeEnv = "KUBELB_XDS_ATTACKER_SHAPE" // "<connections>x<streams per connection>"
	// attackerWait bounds the wait for one stream: a stream beyond the connection's limit
	// waits in the client (gRPC honours the server's SETTINGS) until then.
	attackerWait = 5 * time.Second
)

// TestXDSStreamFloodMemory measures the server's heap while one tenant's client holds open
// as many streams as it can, 2000 in two shapes (400 connections × 5 streams, and one
// connection × 2000 streams), with the default limits and with limits too high to apply
// (what the server did before them). It asserts the counts under the limits and logs the
// figures (docs/security.md).
func TestXDSStreamFloodMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("measures memory with 2000 streams")
	}
	const attacker = "tenant-xdsmem-b"
	unlimited := Limits{ConnectionsPerTenant: math.MaxInt32, StreamsPerConnection: 1 << 16, StreamsPerTenant: math.MaxInt32, RequestsPerSecond: 1e9, RequestBurst: math.MaxInt32,
		TenantRequestsPerSecond: 1e9, TenantRequestBurst: math.MaxInt32, MaxRequestBytes: DefaultMaxRequestBytes}
	for _, run := range []struct {
		name                       string
		limits                     Limits
		connections, perConnection int
	}{
		{"default limits, 400 connections", DefaultLimits(), 400, 5},
		{"no limits, 400 connections", unlimited, 400, 5},
		{"default limits, one connection", DefaultLimits(), 1, 2000},
		{"no limits, one connection", unlimited, 1, 2000},
	} {
		t.Run(run.name, func(t *testing.T) {
			p := xdstest.New(t)
			srv, addr := startXDSLimits(t, run.limits)
			if _, err := srv.SetTenant(context.Background(), attacker, nil); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			for k, v := range p.ClientSecretData(t, attacker) {
				if k == pki.KeyCert || k == pki.KeyKey || k == pki.KeyCA {
					if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			before := heapInuse()
			goroutinesBefore := runtime.NumGoroutine()

			cmd := exec.Command(os.Args[0], "-test.run=^TestXDSAttackerProcess$", "-test.v")
			cmd.Env = append(os.Environ(), attackerEnv+"="+addr, attackerDirEnv+"="+dir,
				fmt.Sprintf("%s=%dx%d", attackerShapeEnv, run.connections, run.perConnection))
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = stdin.Close() // the attacker closes its streams and exits
				if err := cmd.Wait(); err != nil {
					t.Errorf("attacker process: %v", err)
				}
			}()
			var accepted, refused, waiting int
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if _, err := fmt.Sscanf(sc.Text(), "attacker: accepted %d refused %d waiting %d", &accepted, &refused, &waiting); err == nil {
					break
				}
			}
			go func() {
				for sc.Scan() { // drain
				}
			}()
			held, conns := streamsOf(srv, attacker), connsOf(srv, attacker)
			growth := heapInuse() - before
			goroutines := runtime.NumGoroutine() - goroutinesBefore
			asked := run.connections * run.perConnection
			t.Logf("%s: %d streams asked for over %d connections: %d accepted, %d refused, %d left waiting by the client; server holds %d streams on %d connections, heap in use +%.1f MiB, +%d goroutines",
				run.name, asked, run.connections, accepted, refused, waiting, held, conns, float64(growth)/(1<<20), goroutines)
			if accepted+refused+waiting != asked {
				t.Errorf("the attacker saw %d streams accepted, %d refused and %d waiting, want %d in all", accepted, refused, waiting, asked)
			}
			if conns > run.limits.ConnectionsPerTenant {
				t.Errorf("the server holds %d connections of the attacker, more than the limit %d", conns, run.limits.ConnectionsPerTenant)
			}
			if held > run.limits.StreamsPerTenant {
				t.Errorf("the server holds %d streams of the attacker, more than the limit %d", held, run.limits.StreamsPerTenant)
			}
		})
	}
}

// heapInuse is the heap in use after a collection.
func heapInuse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// TestXDSAttackerProcess is the attacker of TestXDSStreamFloodMemory (it runs only as its
// helper process): it opens the connections and the ADS streams on each that
// KUBELB_XDS_ATTACKER_SHAPE says, prints how many the server accepted, and holds them until stdin closes.
func TestXDSAttackerProcess(t *testing.T) {
	addr := os.Getenv(attackerEnv)
	if addr == "" {
		t.Skip("helper process of TestXDSStreamFloodMemory")
	}
	dir := os.Getenv(attackerDirEnv)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cert, err := tls.X509KeyPair(read(pki.KeyCert), read(pki.KeyKey))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(read(pki.KeyCA))
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, ServerName: xdstest.ServerName, MinVersion: tls.VersionTLS12}
	tenant, err := pki.TenantOf(cert.Leaf)
	if err != nil {
		t.Fatal(err)
	}

	var connections, perConnection int
	if _, err := fmt.Sscanf(os.Getenv(attackerShapeEnv), "%dx%d", &connections, &perConnection); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		wg                         sync.WaitGroup
		mu                         sync.Mutex
		accepted, refused, waiting int
		other                      []string
	)
	for range connections {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for range perConnection {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The stream stays open until ctx ends; only the wait for it is bounded.
				sctx, stop := context.WithCancel(ctx)
				timer := time.AfterFunc(attackerWait, stop)
				_, err := openADS(sctx, conn, tenant)
				if !timer.Stop() && err != nil {
					err = status.Error(codes.DeadlineExceeded, "not served within the wait")
				}
				mu.Lock()
				defer mu.Unlock()
				switch status.Code(err) {
				case codes.OK:
					accepted++
				case codes.ResourceExhausted, codes.Unavailable: // a stream or a connection refused
					refused++
				case codes.DeadlineExceeded: // beyond the connection's limit: never sent
					waiting++
				default:
					other = append(other, err.Error())
				}
			}()
		}
	}
	wg.Wait()
	if len(other) > 0 {
		t.Errorf("%d streams failed otherwise, first: %s", len(other), other[0])
	}
	fmt.Println("attacker: accepted " + strconv.Itoa(accepted) + " refused " + strconv.Itoa(refused) + " waiting " + strconv.Itoa(waiting))
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
}
