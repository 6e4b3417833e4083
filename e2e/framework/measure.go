package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"kubelb.dev/kubelb/internal/manager/envoyfleet"
)

// EnvoyBootstrap reads the Envoy bootstrap the manager generated for a tenant namespace.
var EnvoyBootstrap = envoyfleet.BootstrapFor

// ProcessCPU returns the CPU seconds (user+system) a process has used so far.
func ProcessCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

// CPUByCommand returns the CPU seconds used so far by the processes this process can see,
// added up by command name (/proc/<pid>/comm, e.g. "kube-apiserver", "etcd", "envoy"). In
// the harness's own PID namespace (RunInNetNS) those are exactly the processes it started
// and itself. A process that ends between two readings takes its CPU with it.
func CPUByCommand() (map[string]float64, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			continue // ended meanwhile
		}
		cpu, err := ProcessCPU(pid)
		if err != nil {
			continue
		}
		out[strings.TrimSpace(string(comm))] += cpu
	}
	return out, nil
}

// MachineCPU returns the CPU seconds all CPUs of the machine have been busy and idle so far
// (/proc/stat's first line; idle counts iowait). It is not namespaced: every process of the
// machine counts.
func MachineCPU() (busy, idle float64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected /proc/stat line %q", line)
	}
	for i, v := range f[1:] {
		if i >= 8 { // guest times are already in user and nice
			break
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		if i == 3 || i == 4 { // idle, iowait
			idle += x / 100
		} else {
			busy += x / 100
		}
	}
	return busy, idle, nil
}

// ProcessPeakRSS returns a process's peak resident memory in bytes (VmHWM).
func ProcessPeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM for pid %d", pid)
}

// APIWrites returns the write requests (POST, PUT, PATCH, DELETE, APPLY) an API server has
// served, from its own apiserver_request_total metric, keyed "VERB resource[/subresource]".
func APIWrites(ctx context.Context, cfg *rest.Config) (map[string]int64, error) {
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(line[len("apiserver_request_total{"):strings.LastIndexByte(line, '}')], ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(v, `"`)
			}
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		default:
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		fields := strings.Fields(line)
		v, _ := strconv.ParseFloat(fields[len(fields)-1], 64)
		out[key] += int64(v)
	}
	return out, nil
}

// WritesSince returns the writes in after that are not in before, and their total.
func WritesSince(before, after map[string]int64) (map[string]int64, int64) {
	diff := map[string]int64{}
	var total int64
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			diff[k] = d
			total += d
		}
	}
	return diff, total
}

// CollectProfiles fetches CPU profiles of the named processes' /debug/pprof endpoints
// (address by name; a process runs with --pprof-bind-address) back to back, each covering
// window, into dir/<name>-cpu-<i>.pprof, each followed by a heap profile dir/<name>-heap-<i>.pprof,
// until the returned stop is called; stop waits for
// the profiles under way and then writes a heap profile of each, dir/<name>-heap.pprof.
// `go tool pprof` merges several profiles given together.
func CollectProfiles(t interface{ Logf(string, ...any) }, dir string, addrs map[string]string, window time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	fetch := func(url, file string) error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		f, err := os.Create(file)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(f, resp.Body)
		return err
	}
	for name, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(window.Seconds()))
				if err := fetch(url, filepath.Join(dir, fmt.Sprintf("%s-cpu-%d.pprof", name, i))); err != nil {
					t.Logf("profiling %s: %v", name, err)
					return
				}
				// the heap after every window: a peak in the middle of a burst is gone by its end
				if err := fetch("http://"+addr+"/debug/pprof/heap", filepath.Join(dir, fmt.Sprintf("%s-heap-%d.pprof", name, i))); err != nil {
					t.Logf("profiling %s: %v", name, err)
					return
				}
			}
		}()
	}
	return func() {
		cancel()
		wg.Wait()
		for name, addr := range addrs {
			if err := fetch("http://"+addr+"/debug/pprof/heap", filepath.Join(dir, name+"-heap.pprof")); err != nil {
				t.Logf("profiling %s: %v", name, err)
			}
		}
	}
}
