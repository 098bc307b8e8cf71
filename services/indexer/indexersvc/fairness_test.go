package indexersvc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// queryModel answers questions; a question containing "block" waits until
// released or its context ends (and says when it entered and ended).
type queryModel struct {
	mu      sync.Mutex
	prompts []string
	release chan struct{}
	entered chan struct{}
	ended   chan error
}

func newQueryModel() *queryModel {
	return &queryModel{release: make(chan struct{}), entered: make(chan struct{}, 100), ended: make(chan error, 100)}
}

func (*queryModel) Name() string  { return "query" }
func (*queryModel) Model() string { return "query-1" }
func (m *queryModel) Complete(ctx context.Context, r llm.Request) (*llm.Response, error) {
	if r.Task != llm.TaskQuery {
		return &llm.Response{Text: `{"name":"n","description":"d","summary":"s","tags":["t"]}`, Model: "query-1"}, nil
	}
	m.mu.Lock()
	m.prompts = append(m.prompts, memory.RequestText(&r.Messages[0]))
	m.mu.Unlock()
	if strings.Contains(r.Question, "block") {
		m.entered <- struct{}{}
		select {
		case <-m.release:
		case <-ctx.Done():
			m.ended <- ctx.Err()
			return nil, ctx.Err()
		}
	}
	return &llm.Response{Text: "It says so [1].", Model: "query-1"}, nil
}

func (m *queryModel) calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.prompts)
}

func (m *queryModel) lastPrompt() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.prompts[len(m.prompts)-1]
}

// fairness is an indexer under test with its server and client.
type fairness struct {
	srv  *natstest.Server
	ctx  context.Context
	nc   *nats.Conn
	js   jetstream.JetStream
	stop func() // stops the indexer and waits for Run to return
}

// startFair provisions a server, publishes n messages of size bytes to
// each of sessions (tenant/session), and runs an indexer with cfg.
func startFair(t *testing.T, cfg Config, sessions []string, n, size int) *fairness {
	t.Helper()
	srv, nc, js, prov := provisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	for _, ts := range sessions {
		tenant, session, _ := strings.Cut(ts, "/")
		s := eventtest.NewSession(tenant, session)
		for i := range n {
			eventtest.Publish(ctx, t, js, testLayout, s.Message(fmt.Sprint(i), events.Message{UUID: fmt.Sprintf("%s-u%d", session, i),
				Role: events.RoleUser, Content: eventtest.Text(fmt.Sprintf("message %d %s", i, strings.Repeat("word ", size/5)))}))
		}
	}
	cfg.NATS, cfg.Config = natsconn.Config{URL: srv.ClientURL()}, prov
	runCtx, stopRun := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = Run(runCtx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	stop := sync.OnceFunc(func() { stopRun(); <-done })
	t.Cleanup(stop)
	testpoll.Until(t, 20*time.Second, "the indexer serving", func() bool {
		_, err := chunked.Request(ctx, nc, events.APISubject(events.VerbIndex, "probe", "x"), nil, nil)
		return err == nil
	})
	return &fairness{srv: srv, ctx: ctx, nc: nc, js: js, stop: stop}
}

// request sends body to verb for tenant/session and returns the reply.
func (f *fairness) request(t *testing.T, verb, tenant, session string, body any) *nats.Msg {
	t.Helper()
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(f.ctx, 20*time.Second)
	defer cancel()
	m, err := chunked.Request(ctx, f.nc, events.APISubject(verb, tenant, session), nil, b)
	if err != nil {
		t.Fatalf("%s %s/%s: %v", verb, tenant, session, err)
	}
	return m
}

func code(m *nats.Msg) string { return m.Header.Get(micro.ErrorCodeHeader) }

// TestResolveRefsCap: a resolve holding more references than
// ResolveMaxRefs is refused with 400 naming the cap, before any of them is
// resolved or answered; one at the cap is served (repeated questions
// answered once).
func TestResolveRefsCap(t *testing.T) {
	model := newQueryModel()
	f := startFair(t, Config{Provider: model}, []string{"acme/big"}, 3, 100)
	over := strings.Repeat("@@big: what?\n", DefaultResolveMaxRefs+1)
	m := f.request(t, events.VerbResolve, "acme", events.TenantScope, events.ResolveRequest{Text: over, Answer: true})
	if code(m) != "400" || !strings.Contains(m.Header.Get(micro.ErrorHeader), fmt.Sprintf("at most %d", DefaultResolveMaxRefs)) {
		t.Fatalf("%d references: %q %q", DefaultResolveMaxRefs+1, code(m), m.Header.Get(micro.ErrorHeader))
	}
	if model.calls() != 0 {
		t.Fatalf("a refused resolve made %d model calls", model.calls())
	}
	at := strings.Repeat("@@big: what?\n", DefaultResolveMaxRefs)
	m = f.request(t, events.VerbResolve, "acme", events.TenantScope, events.ResolveRequest{Text: at, Answer: true})
	var r events.ResolveReply
	if code(m) != "" || json.Unmarshal(m.Data, &r) != nil || len(r.Resolved) != DefaultResolveMaxRefs || r.Resolved[0].Answer == nil {
		t.Fatalf("%d references: %q %s", DefaultResolveMaxRefs, code(m), m.Data)
	}
	if model.calls() != 1 {
		t.Fatalf("the same question to the same session made %d model calls, want 1", model.calls())
	}
}

// TestQueryBudgetCapped: budget_tokens 1e9 over a session of about 90,000
// tokens sends at most RECALL_QUERY_MAX_BUDGET_TOKENS (50,000) to the
// model, and a tenant's query_max_budget_tokens lowers it live.
func TestQueryBudgetCapped(t *testing.T) {
	model := newQueryModel()
	f := startFair(t, Config{Provider: model}, []string{"acme/big"}, 90, 4000)
	ask := func() events.QueryReply {
		t.Helper()
		m := f.request(t, events.VerbQuery, "acme", "big", events.QueryRequest{Question: "what?", BudgetTokens: 1e9})
		var r events.QueryReply
		if code(m) != "" || json.Unmarshal(m.Data, &r) != nil {
			t.Fatalf("query: %q %s", code(m), m.Data)
		}
		return r
	}
	r := ask()
	prompt := memory.EstimateText(model.lastPrompt())
	if r.InputTokens > DefaultQueryMaxBudgetTokens || prompt > DefaultQueryMaxBudgetTokens+200 || r.Truncated == 0 {
		t.Fatalf("budget 1e9: input_tokens %d, prompt ≈%d tokens, %d records left out (cap %d)", r.InputTokens, prompt, r.Truncated, DefaultQueryMaxBudgetTokens)
	}
	if r.InputTokens < DefaultQueryMaxBudgetTokens/2 {
		t.Fatalf("budget 1e9 gave only %d tokens of a 90,000-token session", r.InputTokens)
	}
	if _, err := tenantcfg.Put(f.ctx, f.js, "acme", events.TenantConfig{QueryMaxBudgetTokens: 5000}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 10*time.Second, "the tenant's cap applied", func() bool { return ask().InputTokens <= 5000 })
}

// TestTenantAdmission: with two requests per tenant, acme's third while
// two of its questions wait on the model is refused at once with 429 and
// Retry-After, while globex is served; once acme's are answered it is
// served again.
func TestTenantAdmission(t *testing.T) {
	model := newQueryModel()
	f := startFair(t, Config{Provider: model, TenantRequests: 2, Requests: 10}, []string{"acme/a", "globex/b"}, 2, 100)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := json.Marshal(events.QueryRequest{Question: "block?"})
			m, err := chunked.Request(f.ctx, f.nc, events.APISubject(events.VerbQuery, "acme", "a"), nil, b)
			if err != nil || code(m) != "" {
				t.Errorf("acme's admitted question: %v %v", err, m)
			}
		}()
	}
	for range 2 {
		select {
		case <-model.entered:
		case <-f.ctx.Done():
			t.Fatal("acme's questions did not reach the model")
		}
	}
	m := f.request(t, events.VerbQuery, "acme", "a", events.QueryRequest{Question: "third?"})
	if code(m) != "429" || m.Header.Get("Retry-After") == "" {
		t.Fatalf("acme over its share: %q %q Retry-After %q", code(m), m.Header.Get(micro.ErrorHeader), m.Header.Get("Retry-After"))
	}
	if m := f.request(t, events.VerbResolve, "acme", events.TenantScope, events.ResolveRequest{Ref: "a"}); code(m) != "429" {
		t.Fatalf("acme's resolve over its share: %q", code(m))
	}
	if m := f.request(t, events.VerbQuery, "globex", "b", events.QueryRequest{Question: "what?"}); code(m) != "" {
		t.Fatalf("globex while acme is over its share: %q %s", code(m), m.Header.Get(micro.ErrorHeader))
	}
	close(model.release)
	wg.Wait()
	if m := f.request(t, events.VerbQuery, "acme", "a", events.QueryRequest{Question: "again?"}); code(m) != "" {
		t.Fatalf("acme after its questions were answered: %q", code(m))
	}
}

// TestRequestCancelledWhenServiceStops: a question waiting on the model
// has its context cancelled as soon as the indexer stops (not after
// RECALL_INDEX_TIMEOUT, two minutes here).
func TestRequestCancelledWhenServiceStops(t *testing.T) {
	model := newQueryModel()
	f := startFair(t, Config{Provider: model, Timeout: 2 * time.Minute}, []string{"acme/a"}, 2, 100)
	go func() {
		b, _ := json.Marshal(events.QueryRequest{Question: "block?"})
		_, _ = chunked.Request(f.ctx, f.nc, events.APISubject(events.VerbQuery, "acme", "a"), nil, b)
	}()
	<-model.entered
	stopped := make(chan struct{})
	go func() { f.stop(); close(stopped) }()
	select {
	case err := <-model.ended:
		if err != context.Canceled {
			t.Fatalf("the model's context ended with %v, want canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the question's model call was still running 10 s after the indexer stopped")
	}
	<-stopped
}
