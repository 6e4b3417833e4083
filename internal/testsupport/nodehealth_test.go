package testsupport

import (
	"context"
	"strings"
	"testing"
)

// TestNodeHealthAnswersAsKubeProxy: /healthz is 200 with local endpoints and 503 without,
// other paths are 404, and every check is counted.
func TestNodeHealthAnswersAsKubeProxy(t *testing.T) {
	t.Parallel()
	h := StartNodeHealth(t, "127.0.0.1:0", "shop/web", 1)
	get := func(path string) (int, string) {
		t.Helper()
		code, body, err := HTTPGet(context.Background(), "http://"+h.Addr+path)
		if err != nil {
			t.Fatal(err)
		}
		return code, body
	}
	if code, body := get("/healthz"); code != 200 || !strings.Contains(body, `"localEndpoints":1`) {
		t.Errorf("with a local endpoint: %d %q", code, body)
	}
	h.SetLocalEndpoints(0)
	if code, body := get("/healthz"); code != 503 || !strings.Contains(body, `"localEndpoints":0`) {
		t.Errorf("without local endpoints: %d %q", code, body)
	}
	if code, _ := get("/other"); code != 404 {
		t.Errorf("/other: %d, want 404", code)
	}
	if n := h.Checks(); n != 2 {
		t.Errorf("checks = %d, want 2", n)
	}
}
