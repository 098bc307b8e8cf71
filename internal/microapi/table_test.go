package microapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// TestServeTable serves a table of a quick and an answer-later endpoint:
// a failed Check is refused at once with its code; the quick endpoint's work runs under the service's run context
// (cancelled when it ends, not context.Background()); a later endpoint
// admits per tenant, so one tenant's held request neither delays nor
// takes the slot of another's, and its excess is refused 429; a panic
// answers 500; a reply outside the tenant's reply space is dropped.
func TestServeTable(t *testing.T) {
	s := natstest.Start(t)
	nc, _ := s.Connect(t)
	run, stop := context.WithCancel(context.Background())
	defer stop()
	later := microapi.NewLater(run, nc, slog.Default(), 0)
	hold := make(chan struct{})
	svc, err := microapi.Serve(later, microapi.Service{Name: "table-test", Endpoints: []microapi.Endpoint{
		{Verb: "quick", Mode: microapi.Quick, Handle: func(ctx context.Context, r microapi.Request) (any, *microapi.Error) {
			_, deadline := ctx.Deadline()
			return map[string]any{"tenant": r.Tenant, "deadline": deadline, "run_ctx": context.Cause(ctx) == nil && ctx.Done() != nil}, nil
		}},
		{Verb: "slow", Mode: microapi.AnswerLater, Admission: microapi.NewAdmission(1, 0, time.Second),
			Check: func(_ context.Context, r *microapi.Request) *microapi.Error {
				if string(r.Data) == "bad" {
					return microapi.Fail(400, "bad body")
				}
				r.Value = string(r.Data)
				return nil
			},
			Handle: func(ctx context.Context, r microapi.Request) (any, *microapi.Error) {
				switch r.Value {
				case "hold":
					<-hold
				case "panic":
					panic("boom")
				}
				return map[string]string{"session": r.Session}, nil
			}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	if err := nc.Flush(); err != nil { // the endpoints' subscriptions are registered
		t.Fatal(err)
	}
	conn := func(tenant string) *nats.Conn {
		c, _ := s.Connect(t, nats.CustomInboxPrefix(events.InboxPrefix(tenant)))
		return c
	}
	acme, beta := conn("acme"), conn("beta")
	ask := func(c *nats.Conn, subject, body string) (string, []byte) {
		t.Helper()
		m, err := c.Request(subject, []byte(body), 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
		return m.Header.Get(micro.ErrorCodeHeader), m.Data
	}
	code, b := ask(acme, events.APISubject("quick", "acme", "s1"), "")
	var q struct {
		Tenant   string `json:"tenant"`
		Deadline bool   `json:"deadline"`
		RunCtx   bool   `json:"run_ctx"`
	}
	if err := json.Unmarshal(b, &q); err != nil || code != "" || q.Tenant != "acme" || !q.Deadline || !q.RunCtx {
		t.Fatalf("quick: code %q %s", code, b)
	}
	if code, _ := ask(acme, events.APISubject("slow", "acme", "s1"), "bad"); code != "400" {
		t.Fatalf("failed check: code %q", code)
	}
	if code, _ := ask(acme, events.APISubject("slow", "acme", "s1"), "panic"); code != "500" {
		t.Fatalf("panic: code %q", code)
	}
	held := make(chan string, 1)
	go func() {
		code, _ := ask(acme, events.APISubject("slow", "acme", "s1"), "hold")
		held <- code
	}()
	testpoll.Until(t, 5*time.Second, "acme's request to be held", func() bool { return later.Snapshot("slow").InFlight > 0 })
	if code, _ := ask(acme, events.APISubject("slow", "acme", "s2"), "x"); code != "429" {
		t.Fatalf("acme over its share: code %q", code)
	}
	if code, b := ask(beta, events.APISubject("slow", "beta", "s1"), "x"); code != "" {
		t.Fatalf("beta while acme's request is held: code %q %s", code, b)
	}
	close(hold)
	if code := <-held; code != "" {
		t.Fatalf("acme's held request: code %q", code)
	}
	if _, err := nc.Request(events.APISubject("quick", "acme", "s1"), nil, 300*time.Millisecond); err == nil {
		t.Fatal("a reply outside acme's reply space was sent")
	}
}
