package longtermsvc

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

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// testProvision is what the tests provision: two commit partitions, the
// default shards (testLayout), in memory.
var testProvision = provision.Config{Partitions: 2, MemoryStorage: true}

// fixture is an embedded server provisioned as Recall's and a committer
// on it, built as Run builds it, whose model is a scripted fake. Its
// session is s1 of tenant acme.
type fixture struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	c     *committer
	model *scripted
	s     eventtest.Session
	n     int // ids given
}

// newFixture provisions a server and builds a committer with cfg (zero
// values take the defaults; the provisioning and a test id are filled in).
func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := srv.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := provision.Ensure(ctx, js, testProvision); err != nil {
		t.Fatal(err)
	}
	ltm, err := js.KeyValue(ctx, events.BucketLTM)
	if err != nil {
		t.Fatal(err)
	}
	state, err := js.KeyValue(ctx, events.BucketLTMState)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	tenants, err := tenantcfg.Watch(wctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Config, cfg.ID = testProvision, "lt-test"
	cfg = cfg.withDefaults()
	model := &scripted{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &committer{ltm: ltm, state: state, reader: transcript.NewReader(nc, cfg.Layout()), tenants: tenants, provider: model,
		pub: eventpub.New(js, "longterm"), cfg: cfg, log: log, m: newMetrics(), holder: cfg.ID, slots: make(chan struct{}, cfg.Concurrency)}
	return &fixture{nc: nc, js: js, c: c, model: model, s: eventtest.NewSession("acme", "s1")}
}

// add stores evs in the session's shard and returns the last one's
// sequence.
func (f *fixture) add(t *testing.T, evs ...event.Event) uint64 {
	t.Helper()
	seqs := eventtest.Publish(context.Background(), t, f.js, f.c.reader.Layout(), evs...)
	return seqs[len(seqs)-1]
}

// id is the next event id of the session.
func (f *fixture) id() string {
	f.n++
	return fmt.Sprint(f.n)
}

// start stores the session's start: user and policy (nil: none).
func (f *fixture) start(t *testing.T, user string, p *events.MemoryPolicy) uint64 {
	t.Helper()
	return f.add(t, f.s.Started(f.id(), events.SessionStarted{UserID: user, MemoryPolicy: p}))
}

// say stores a user message, from peer when peer is set.
func (f *fixture) say(t *testing.T, peer, text string) uint64 {
	t.Helper()
	return f.add(t, f.s.Peer(f.id(), peer, text))
}

// end stores the session's end.
func (f *fixture) end(t *testing.T) uint64 {
	t.Helper()
	return f.add(t, f.s.Ended(f.id()))
}

// docs are the stored memory documents of tenant's user by path
// (self/<type>, peer/<peer>/<type>).
func (f *fixture) docs(t *testing.T, tenant, user string) map[string]string {
	t.Helper()
	list, err := listDocs(context.Background(), f.c.ltm, tenant, user)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range list {
		out[d.Target+"/"+d.Type] = d.Content
	}
	return out
}

// record is the session's commit record (zero when none).
func (f *fixture) record(t *testing.T) events.CommitRecord {
	t.Helper()
	rec, _, err := f.c.record(context.Background(), "acme", "s1")
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// announcements gathers the memory.committed notifications of tenant acme.
type announcements struct {
	mu  sync.Mutex
	all []events.MemoryCommitted
}

func (f *fixture) watch(t *testing.T) *announcements {
	t.Helper()
	a := &announcements{}
	sub, err := f.nc.Subscribe(events.EventsSubject(events.KindMemoryCommitted, "acme", "*"), func(m *nats.Msg) {
		var out events.MemoryCommitted
		if json.Unmarshal(m.Data, &out) == nil {
			a.mu.Lock()
			a.all = append(a.all, out)
			a.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return a
}

func (a *announcements) list() []events.MemoryCommitted {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]events.MemoryCommitted(nil), a.all...)
}

// scripted is an in-process model. A phase's first call answers with the
// tool calls plan returns (none: a text answer); a call that carries tool
// results answers "Done." (after onResults, when set). While failing is
// not zero, calls fail with a retryable error (< 0: until set again). It
// records every request.
type scripted struct {
	mu        sync.Mutex
	plan      func(req llm.Request) []llm.ToolCall
	onResults func(req llm.Request)
	failing   int
	reqs      []llm.Request
	at        []time.Time
}

var errOverloaded = fmt.Errorf("%w: 529 overloaded", llm.ErrRetryable)

func (*scripted) Name() string  { return "scripted" }
func (*scripted) Model() string { return "scripted-1" }

func (m *scripted) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	m.reqs, m.at = append(m.reqs, req), append(m.at, time.Now())
	failing, plan, onResults := m.failing, m.plan, m.onResults
	if failing > 0 {
		m.failing--
	}
	m.mu.Unlock()
	switch {
	case failing != 0:
		return nil, errOverloaded
	case len(req.Messages) > 1:
		if onResults != nil {
			onResults(req)
		}
		return &llm.Response{Text: "Done.", Model: "scripted-1", Usage: events.TokenUsage{InputTokens: 3, OutputTokens: 1}}, nil
	case plan == nil:
		return &llm.Response{Text: "Nothing durable.", Model: "scripted-1"}, nil
	}
	return &llm.Response{ToolCalls: plan(req), Model: "scripted-1", Usage: events.TokenUsage{InputTokens: 10, OutputTokens: 5}}, nil
}

func (m *scripted) setPlan(plan func(req llm.Request) []llm.ToolCall) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.plan = plan
}

func (m *scripted) setFailing(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failing = n
}

// requests are the calls so far.
func (m *scripted) requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llm.Request(nil), m.reqs...)
}

func (m *scripted) times() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Time(nil), m.at...)
}

// toolResult is one tool result the model was given.
type toolResult struct {
	text    string
	isError bool
}

// results are the tool results of the calls so far, by tool call id.
func (m *scripted) results() map[string]toolResult {
	out := map[string]toolResult{}
	for _, req := range m.requests() {
		for _, msg := range req.Messages {
			for _, b := range msg.Content {
				if b.Type == events.BlockToolResult && len(b.Content) > 0 {
					out[b.ToolUseID] = toolResult{text: b.Content[0].Text, isError: b.IsError}
				}
			}
		}
	}
	return out
}

// call is a tool call with id and input (marshalled to JSON).
func call(id, name string, input any) llm.ToolCall {
	b, err := json.Marshal(input)
	if err != nil {
		panic(err)
	}
	return llm.ToolCall{ID: id, Name: name, Input: b}
}

// write is a memory_write call.
func write(id, typ, content, peer string, ranges ...[2]int) llm.ToolCall {
	return call(id, llm.MemoryWriteTool, writeInput{Type: typ, Content: content, PeerID: peer, Ranges: ranges})
}

// phaseOf is the phase a model call extracts: long_term or execution (by
// the types it is given).
func phaseOf(req llm.Request) string {
	if strings.Contains(strings.Join(req.MemoryTypes, ","), "trajectories") {
		return "execution"
	}
	return "long_term"
}
