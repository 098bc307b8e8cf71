package console_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/recallhq/recall/services/ingest/console"
)

// TestConsoleAdmission: session lists, pages, previews and parked lists
// pass through Config.Admit with the tenant they read; a refusal is the
// answer; static files and whoami are not admitted.
func TestConsoleAdmission(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	f := start(t, func(c *console.Config) {
		c.Admit = func(w http.ResponseWriter, r *http.Request, tenant, endpoint string) (func(), bool) {
			mu.Lock()
			asked = append(asked, tenant+" "+endpoint)
			mu.Unlock()
			if tenant == "acme" {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return nil, false
			}
			return func() {}, true
		}
	})
	f.say(t, "beta", "s1", "m1", "hello")
	for _, c := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/console/api/tenants/acme/sessions", "a", http.StatusTooManyRequests},
		{"GET", "/console/api/tenants/acme/sessions/s1", "a", http.StatusTooManyRequests},
		{"POST", "/console/api/tenants/acme/sessions/s1/preview", "a", http.StatusTooManyRequests},
		{"GET", "/console/api/tenants/beta/sessions", "b", http.StatusOK},
		{"GET", "/console/api/tenants/beta/sessions/s1", "b", http.StatusOK},
		{"GET", "/console/api/whoami", "a", http.StatusOK},
	} {
		if got := f.get(t, c.method, c.path, c.token, "", nil); got != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, got, c.want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 5 || !strings.HasPrefix(asked[0], "acme GET /console/api/tenants/{tenant}/sessions") {
		t.Fatalf("admitted: %q", asked)
	}
}

// TestConsoleNotFramed: the page may not be framed by another site.
func TestConsoleNotFramed(t *testing.T) {
	f := start(t)
	resp, err := http.Get(f.url + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("CSP %q", csp)
	}
}
