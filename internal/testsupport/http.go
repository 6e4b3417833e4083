package testsupport

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// HTTPGet fetches a URL on loopback and returns status and body.
func HTTPGet(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// HTTPGetOK is HTTPGet bounded by timeout, with any status but 200 an error.
func HTTPGetOK(url string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	code, body, err := HTTPGet(ctx, url)
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return body, fmt.Errorf("GET %s: status %d: %s", url, code, strings.TrimSpace(body))
	}
	return body, nil
}

// WaitHTTP200 waits until url answers 200 and returns the body; it fails early if proc exits.
func WaitHTTP200(t TB, proc *Process, url string, timeout time.Duration) string {
	t.Helper()
	var body string
	Eventually(t, timeout, url, func() error {
		if proc != nil && proc.Exited() {
			t.Fatalf("%s exited early:\n%s", proc.Name, proc.Output())
		}
		b, err := HTTPGetOK(url, 2*time.Second)
		body = b
		return err
	})
	return body
}
