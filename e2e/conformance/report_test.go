package conformance

import (
	"os"
	"path/filepath"
	"testing"

	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/yaml"
)

// TestSameReportIgnoresDateAndVersion: `make test` rewrites a committed report (the main
// run's and the experimental run's) only when the suite's verdict changed, not when only its
// date or the commit under test did.
func TestSameReportIgnoresDateAndVersion(t *testing.T) {
	for _, file := range []string{ReportFile, ExperimentalReportFile} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			committed, err := os.ReadFile("../../" + file)
			if err != nil {
				t.Fatal(err)
			}
			var r confv1.ConformanceReport
			if err := yaml.Unmarshal(committed, &r); err != nil || len(r.ProfileReports) == 0 {
				t.Fatalf("reading the committed report: %v (%d profiles)", err, len(r.ProfileReports))
			}
			marshal := func() []byte {
				b, err := yaml.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			r.Date, r.Implementation.Version = "2099-01-01T00:00:00Z", "another-commit"
			if !sameReport(t, committed, marshal()) {
				t.Errorf("a report that differs only in date and version is not the same")
			}
			r.ProfileReports[0].Core.Passed--
			if sameReport(t, committed, marshal()) {
				t.Errorf("a report with another count of passed tests is the same")
			}
		})
	}
}
