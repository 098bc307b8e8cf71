package ingestsvc

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/erase"
	"github.com/recallhq/recall/pkg/events"
)

// TestEraseWho: a tenant erases its own sessions only, an operator any
// tenant's (named by ?tenant=); the receipt names the tenant; an erased
// session's events get 410 gone, over HTTP and NATS.
func TestEraseWho(t *testing.T) {
	e := startEnv(t, func(c *Config) {
		c.OperatorTokens = HashToken(tokenOperator)
		c.Erase = erase.Config{Drain: time.Millisecond}
	})
	for _, tc := range []struct {
		name, path, token string
		status            int
		tenant            string
	}{
		{"no token", "/v1/sessions/s1", "", http.StatusUnauthorized, ""},
		{"another tenant", "/v1/sessions/s1?tenant=beta", tokenAcme, http.StatusForbidden, ""},
		{"its own", "/v1/sessions/s1", tokenAcme, http.StatusOK, "acme"},
		{"operator without tenant", "/v1/sessions/s1", tokenOperator, http.StatusBadRequest, ""},
		{"operator", "/v1/sessions/s1?tenant=beta", tokenOperator, http.StatusOK, "beta"},
		{"bad id", "/v1/sessions/s.1", tokenAcme, http.StatusBadRequest, ""},
		{"user", "/v1/users/u1?sessions=true", tokenAcme, http.StatusOK, "acme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := e.do(http.MethodDelete, tc.path, tc.token, nil, "")
			if status != tc.status {
				t.Fatalf("%d %s, want %d", status, body, tc.status)
			}
			var r events.EraseReceipt
			if tc.tenant != "" && (json.Unmarshal(body, &r) != nil || r.Tenant != tc.tenant) {
				t.Fatalf("receipt %s, want tenant %s", body, tc.tenant)
			}
		})
	}
	status, _, body := e.post("/v1/events", tokenAcme, map[string]string{"Content-Type": MediaStructured}, mustMarshal(t, structured("late", "s1")))
	if status != http.StatusGone || !contains(string(body), ProblemGone) {
		t.Fatalf("an event of the erased session: %d %s", status, body)
	}
	if status, _, _ := e.do(http.MethodGet, "/v1/sessions/s1/export", tokenAcme, nil, ""); status != http.StatusNotFound {
		t.Errorf("export of the erased session: %d", status)
	}
	// Over NATS: the tenant erases through its own subject, the receipt
	// comes back in its reply space.
	m, err := e.nc.Request(events.APISubject(events.VerbErase, "acme", "s2"), nil, 10*time.Second)
	if err != nil || m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("NATS erase: %v %v", err, m)
	}
	var r events.EraseReceipt
	if err := json.Unmarshal(m.Data, &r); err != nil || r.Tenant != "acme" || r.Session != "s2" {
		t.Fatalf("NATS receipt %s: %v", m.Data, err)
	}
	m, err = e.nc.Request(events.APISubject(events.VerbIngest, "acme", "s2"), mustMarshal(t, structured("late2", "s2")), 10*time.Second)
	if err != nil || m.Header.Get(micro.ErrorCodeHeader) != "410" || !strings.Contains(string(m.Data), ProblemGone) {
		t.Fatalf("NATS event of the erased session: %v %v %s", err, m.Header, m.Data)
	}
}
