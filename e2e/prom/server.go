package prom

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"kubelb.dev/kubelb/internal/testenv"
	"kubelb.dev/kubelb/internal/testsupport"
)

// ScrapeInterval is how often the test Prometheus scrapes its targets.
const ScrapeInterval = time.Second

// Binary is the path of the real Prometheus server: $KUBELB_PROMETHEUS, else prometheus on
// $PATH (Debian's package, installed by `make tools`).
func Binary(t testenv.TB) string {
	t.Helper()
	if p := os.Getenv("KUBELB_PROMETHEUS"); p != "" {
		return p
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus not found on $PATH: run `make tools` (hack/tools.sh prometheus installs Debian's package) or set KUBELB_PROMETHEUS")
	}
	return p
}

// Server is a Prometheus server a test started on loopback.
type Server struct {
	// URL is the base URL of the HTTP API, e.g. http://127.0.0.1:40123.
	URL  string
	Proc *testsupport.Process
}

// Start starts Prometheus on loopback scraping every ScrapeInterval the targets (job name →
// host:port addresses serving /metrics), waits until it is ready, and stops it when the test
// ends.
func Start(t testenv.TB, targets map[string][]string) *Server {
	t.Helper()
	return start(t, jobsOf(targets), nil)
}

// Job is one scrape job of StartJobs.
type Job struct {
	// Name is the job label.
	Name string
	// Targets are host:port addresses.
	Targets []string
	// MetricsPath is the path scraped; default /metrics.
	MetricsPath string
	// Labels are added to every series of the job's targets (as a PodMonitor's relabelings
	// would add them).
	Labels map[string]string
}

// StartJobs is Start with jobs that may have their own metrics path and target labels.
func StartJobs(t testenv.TB, jobs ...Job) *Server {
	t.Helper()
	return start(t, jobs, nil)
}

// jobsOf turns Start's targets into jobs, in job name order.
func jobsOf(targets map[string][]string) []Job {
	jobs := make([]Job, 0, len(targets))
	for j, addrs := range targets {
		jobs = append(jobs, Job{Name: j, Targets: addrs})
	}
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].Name < jobs[b].Name })
	return jobs
}

// start is StartJobs loading ruleFiles (rule_files of prometheus.yml; absolute paths) too.
func start(t testenv.TB, jobs []Job, ruleFiles []string) *Server {
	t.Helper()
	dir := t.TempDir()
	type staticConfig struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels,omitempty"`
	}
	type scrapeConfig struct {
		JobName       string         `json:"job_name"`
		MetricsPath   string         `json:"metrics_path,omitempty"`
		StaticConfigs []staticConfig `json:"static_configs"`
	}
	var scrapes []scrapeConfig
	for _, j := range jobs {
		scrapes = append(scrapes, scrapeConfig{JobName: j.Name, MetricsPath: j.MetricsPath,
			StaticConfigs: []staticConfig{{Targets: j.Targets, Labels: j.Labels}}})
	}
	cfg := map[string]any{
		"global": map[string]string{
			"scrape_interval":     ScrapeInterval.String(),
			"scrape_timeout":      ScrapeInterval.String(),
			"evaluation_interval": ScrapeInterval.String(),
		},
		"scrape_configs": scrapes,
	}
	if len(ruleFiles) > 0 {
		cfg["rule_files"] = ruleFiles
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testsupport.Loopback(testsupport.FreePort(t))
	proc := testsupport.StartProcess(t, "prometheus", Binary(t),
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--storage.tsdb.retention.time=1d",
		"--log.level=warn")
	s := &Server{URL: "http://" + addr, Proc: proc}
	testsupport.WaitHTTP200(t, proc, s.URL+"/-/ready", time.Minute)
	return s
}

// WaitTargetsUp waits until every target has been scraped successfully at least once.
func (s *Server) WaitTargetsUp(t testenv.TB, timeout time.Duration) {
	t.Helper()
	testsupport.Eventually(t, timeout, "Prometheus targets to be up", func() error {
		var data struct {
			ActiveTargets []struct {
				ScrapeURL string `json:"scrapeUrl"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"activeTargets"`
		}
		if err := get(context.Background(), s.URL+"/api/v1/targets", &data); err != nil {
			return err
		}
		if len(data.ActiveTargets) == 0 {
			return fmt.Errorf("no active targets yet")
		}
		for _, tg := range data.ActiveTargets {
			if tg.Health != "up" {
				return fmt.Errorf("%s is %s: %s", tg.ScrapeURL, tg.Health, tg.LastError)
			}
		}
		return nil
	})
}

// Sample is one series of an instant query result.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Result is the outcome of an instant query.
type Result struct {
	// Type is vector, scalar, matrix or string.
	Type string
	// Series holds the series of a vector result.
	Series []Sample
}

// Empty reports whether the result has no series (scalars and strings are never empty).
func (r Result) Empty() bool {
	return (r.Type == "vector" || r.Type == "matrix") && len(r.Series) == 0
}

// InstantQuery runs expr through /api/v1/query of the Prometheus at baseURL. An invalid
// expression is an error carrying Prometheus' message.
func InstantQuery(ctx context.Context, baseURL, expr string) (Result, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := get(ctx, baseURL+"/api/v1/query?query="+url.QueryEscape(expr), &data); err != nil {
		return Result{}, err
	}
	r := Result{Type: data.ResultType}
	if r.Type == "vector" || r.Type == "matrix" {
		if err := json.Unmarshal(data.Result, &r.Series); err != nil {
			return Result{}, fmt.Errorf("decoding %s result: %w", r.Type, err)
		}
	}
	return r, nil
}

// get fetches a Prometheus API URL and decodes the "data" field of a success response.
func get(ctx context.Context, u string, data any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("decoding response of %s (HTTP %d): %w", u, resp.StatusCode, err)
	}
	if body.Status != "success" {
		return &QueryError{Type: body.ErrorType, Message: body.Error}
	}
	return json.Unmarshal(body.Data, data)
}

// QueryError is an error Prometheus returned (bad_data for invalid PromQL).
type QueryError struct{ Type, Message string }

func (e *QueryError) Error() string { return e.Type + ": " + e.Message }

// TB is what CheckQueries needs of a test: the harness's TB and Errorf, so that it reports
// every failing query before the test ends.
type TB interface {
	testenv.TB
	Errorf(format string, args ...any)
}

// CheckOptions tune CheckQueries.
type CheckOptions struct {
	// Timeout bounds the wait for every query to return series (rate() needs two scrapes);
	// default 30s.
	Timeout time.Duration
	// AllowEmpty names queries that may return no series (nil: none may). They must still be
	// valid PromQL.
	AllowEmpty func(Query) bool
	// Only, when set, limits CheckDashboards to the queries it passes (a scenario that feeds
	// some panels only, e.g. one row).
	Only func(Query) bool
}

// CheckQueries runs every query against the Prometheus at baseURL until each returns at least
// one series or the timeout passes. It fails the test, listing each query that errors (at
// once) or stays empty, and returns the last result of every query in the order given.
func CheckQueries(t TB, baseURL string, qs []Query, opts CheckOptions) []Result {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	results := make([]Result, len(qs))
	pending := map[int]bool{}
	for i := range qs {
		pending[i] = true
	}
	failed := map[int]string{}
	deadline := time.Now().Add(opts.Timeout)
	for {
		for i := range qs {
			if !pending[i] {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			r, err := InstantQuery(ctx, baseURL, qs[i].Expr)
			cancel()
			if err != nil {
				if _, bad := err.(*QueryError); bad {
					failed[i] = "error: " + err.Error()
					delete(pending, i)
				}
				continue // transport errors are retried until the deadline
			}
			results[i] = r
			if !r.Empty() || (opts.AllowEmpty != nil && opts.AllowEmpty(qs[i])) {
				delete(pending, i)
			}
		}
		if len(pending) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(ScrapeInterval / 2)
	}
	for i := range pending {
		failed[i] = "no series"
	}
	if len(failed) > 0 {
		idx := make([]int, 0, len(failed))
		for i := range failed {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		var lines []string
		for _, i := range idx {
			lines = append(lines, fmt.Sprintf("  %s\n    → %s", qs[i], failed[i]))
		}
		t.Errorf("%d of %d dashboard queries failed against Prometheus at %s:\n%s",
			len(failed), len(qs), baseURL, strings.Join(lines, "\n"))
	}
	return results
}

// CheckDashboards runs every query of every dashboard the charts under repoRoot ship
// against the Prometheus at baseURL (see CheckQueries). A typical e2e:
//
//	p := prom.Start(t, map[string][]string{"kubelb": {managerMetricsAddr}, "ccm": {ccmMetricsAddr}})
//	p.WaitTargetsUp(t, time.Minute)
//	// ... run a scenario ...
//	prom.CheckDashboards(t, testsupport.RepoRoot(), p.URL, prom.CheckOptions{Timeout: time.Minute})
func CheckDashboards(t TB, repoRoot, baseURL string, opts CheckOptions) []Result {
	t.Helper()
	files, err := DashboardFiles(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := DashboardTargets(files...)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Only != nil {
		qs = slices.DeleteFunc(qs, func(q Query) bool { return !opts.Only(q) })
		if len(qs) == 0 {
			t.Fatal("CheckOptions.Only passes no dashboard query")
		}
	}
	return CheckQueries(t, baseURL, qs, opts)
}
