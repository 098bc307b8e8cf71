package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/llm/llmtest"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/indexer/indexersvc"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// indexStack runs ingest (the HTTP edge) and the indexer.
type indexStack struct {
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
}

// edge is a fresh server with Recall provisioned and the ingest service
// (HTTP on a free port); the test's services run beside it with run, and
// everything stops when the test ends.
type edge struct {
	*indexStack
	prov provision.Config
	ncfg natsconn.Config
	log  *slog.Logger
	ctx  context.Context
	wg   sync.WaitGroup
}

func startEdge(t *testing.T, partitions int) *edge {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := srv.Connect(t)
	e := &edge{prov: provision.Config{Partitions: partitions}, ncfg: natsconn.Config{URL: srv.ClientURL()},
		log: telemetry.NewLogger(os.Stderr, telemetry.Config{LogLevel: "error"})}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := provision.Ensure(ctx, js, e.prov); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	e.ctx = runCtx
	ing, err := ingestsvc.Start(runCtx, ingestsvc.Config{NATS: e.ncfg, Config: e.prov, HTTPAddr: "127.0.0.1:0"}, e.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ing.Shutdown(sctx)
		e.wg.Wait()
	})
	e.indexStack = &indexStack{url: "http://" + ing.Addr(), nc: nc, js: js}
	return e
}

// run runs a service until the test ends or stop is called (stop waits
// for it to return).
func (e *edge) run(service func(ctx context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer close(done)
		_ = service(ctx)
	}()
	return func() { cancel(); <-done }
}

// ping waits until the micro service name answers discovery.
func (e *edge) ping(t *testing.T, name string) {
	t.Helper()
	testpoll.Until(t, 20*time.Second, name+" answers discovery", func() bool {
		_, err := e.nc.Request("$SRV.PING."+name, nil, 200*time.Millisecond)
		return err == nil
	})
}

func startIndexStack(t *testing.T, provider llm.Provider) *indexStack {
	t.Helper()
	e := startEdge(t, 2)
	e.run(func(ctx context.Context) error {
		return indexersvc.Run(ctx, indexersvc.Config{NATS: e.ncfg, Config: e.prov, Provider: provider, Timeout: 20 * time.Second, ReindexWait: 20 * time.Second}, e.log)
	})
	e.ping(t, indexersvc.ServiceName)
	return e.indexStack
}

// e2eSession builds a session's events as a platform posts them (no
// tenant: ingest sets it).
func e2eSession(session string) eventtest.Session {
	return eventtest.Session{ID: session, Source: "/e2e"}
}

// lifecycleEvent is an event of type typ with data, id "<session>-<id>".
func lifecycleEvent(session, id, typ string, data any) map[string]any {
	return eventtest.Map(e2eSession(session).Event(id, typ, data))
}

// conversation is a session's events: its start, then one user request and
// one complete answer per turn.
func conversation(session string, started events.SessionStarted, turns ...string) []map[string]any {
	return append([]map[string]any{lifecycleEvent(session, "start", events.TypeSessionStarted, started)}, turnEvents(session, 0, turns...)...)
}

// turnEvents are turns numbered from first.
func turnEvents(session string, first int, turns ...string) []map[string]any {
	var evs []map[string]any
	for i, req := range turns {
		u, a := fmt.Sprintf("u%d", first+i), fmt.Sprintf("a%d", first+i)
		evs = append(evs,
			message(session, u, events.RoleUser, "", events.Block{Type: events.BlockText, Text: req}),
			message(session, a, events.RoleAssistant, "end_turn", events.Block{Type: events.BlockText, Text: "Done: " + req}))
	}
	return evs
}

func (s *indexStack) post(t *testing.T, evs []map[string]any) {
	t.Helper()
	body, _ := json.Marshal(evs)
	resp, err := http.Post(s.url+"/v1/events", "application/cloudevents-batch+json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("ingest answered %d: %s", resp.StatusCode, msg)
	}
}

// call makes an HTTP API call and decodes a JSON answer into out.
func (s *indexStack) call(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

func (s *indexStack) waitIndexed(t *testing.T, session string) events.SessionIndex {
	t.Helper()
	var r events.IndexReply
	testpoll.Until(t, 20*time.Second, session+" is indexed", func() bool {
		r = events.IndexReply{}
		return s.call(t, "GET", "/v1/sessions/"+session+"/index", "", &r) == 200 && r.Index.Indexed()
	})
	return r.Index
}

var fiveTurns = []string{
	"Refactor the confirm button component so the dialog closes on escape.",
	"Keep the confirm button colour red for destructive actions.",
	"Add a unit test for the escape key handler.",
	"Rename the prop onConfirm to onAccept everywhere.",
	"Run the linter and fix the warnings in the confirm button.",
}

func TestSessionIndexEndToEnd(t *testing.T) {
	s := startIndexStack(t, llm.NewOffline())
	const parentID, child, other, eph = "idx-parent", "idx-child", "idx-other", "idx-ephemeral"

	// Four turns are below the threshold (5 user requests): nothing yet.
	s.post(t, conversation(parentID, events.SessionStarted{CWD: "/src/app", Model: "claude-sonnet-4-5"}, fiveTurns[:4]...))
	s.waitIndexerRead(t, parentID) // then "not indexed" means the indexer decided so
	if code := s.call(t, "GET", "/v1/sessions/"+parentID+"/index", "", nil); code != 404 && code != 200 {
		t.Fatalf("index before the threshold: %d", code)
	}
	var early events.IndexReply
	if s.call(t, "GET", "/v1/sessions/"+parentID+"/index", "", &early); early.Index.Indexed() {
		t.Fatalf("indexed after 4 user requests: %+v", early.Index)
	}
	// The fifth turn end indexes it.
	s.post(t, turnEvents(parentID, 4, fiveTurns[4]))
	parent := s.waitIndexed(t, parentID)
	if parent.Name == "" || parent.Summary == "" || len(parent.Tags) == 0 || parent.CWD != "/src/app" || parent.LastIndexedID == "" {
		t.Fatalf("parent entry: %+v", parent)
	}
	if !strings.Contains(parent.Name, "confirm") {
		t.Fatalf("name %q does not come from the first request", parent.Name)
	}

	// A child session (one turn, then ended) is indexed at its end.
	s.post(t, conversation(child, events.SessionStarted{ParentSession: parentID}, "Refactor the login form validation messages."))
	s.post(t, []map[string]any{lifecycleEvent(child, "end", events.TypeSessionEnded, events.SessionEnded{})})
	kid := s.waitIndexed(t, child)
	if kid.ParentSession != parentID || !kid.Ended {
		t.Fatalf("child entry: %+v", kid)
	}
	// An ephemeral session is never indexed, even forced.
	s.post(t, conversation(eph, events.SessionStarted{Ephemeral: true}, fiveTurns...))
	s.post(t, []map[string]any{lifecycleEvent(eph, "end", events.TypeSessionEnded, events.SessionEnded{})})
	s.post(t, conversation(other, events.SessionStarted{}, "Write the release notes for version 2."))
	s.post(t, []map[string]any{lifecycleEvent(other, "end", events.TypeSessionEnded, events.SessionEnded{})})
	s.waitIndexed(t, other)
	var e events.IndexReply
	if code := s.call(t, "GET", "/v1/sessions/"+eph+"/index", "", &e); code == 200 && e.Index.Indexed() {
		t.Fatalf("ephemeral session indexed: %+v", e.Index)
	}
	if code := s.call(t, "POST", "/v1/sessions/"+eph+"/index", "", nil); code != http.StatusConflict {
		t.Fatalf("forced indexing of an ephemeral session: %d, want 409", code)
	}

	t.Run("list and filters", func(t *testing.T) {
		var all events.SessionsReply
		if code := s.call(t, "GET", "/v1/sessions", "", &all); code != 200 || len(all.Sessions) != 3 {
			t.Fatalf("list: %d %+v", code, all)
		}
		var page events.SessionsReply
		s.call(t, "GET", "/v1/sessions?limit=2", "", &page)
		if len(page.Sessions) != 2 || page.Next == "" {
			t.Fatalf("page 1: %+v", page)
		}
		var rest events.SessionsReply
		s.call(t, "GET", "/v1/sessions?limit=2&cursor="+page.Next, "", &rest)
		if len(rest.Sessions) != 1 || rest.Next != "" {
			t.Fatalf("page 2: %+v", rest)
		}
		var q events.SessionsReply
		s.call(t, "GET", "/v1/sessions?q="+url.QueryEscape("release notes"), "", &q)
		if len(q.Sessions) != 1 || q.Sessions[0].Session != other {
			t.Fatalf("q filter: %+v (all: %+v)", q, all)
		}
		var tagged events.SessionsReply
		s.call(t, "GET", "/v1/sessions?tag="+parent.Tags[0], "", &tagged)
		if len(tagged.Sessions) == 0 || tagged.Sessions[0].Session != parentID && tagged.Sessions[len(tagged.Sessions)-1].Session != parentID {
			t.Fatalf("tag %q: %+v", parent.Tags[0], tagged)
		}
	})

	t.Run("references", func(t *testing.T) {
		var byID, byName, fuzzy, anc events.ResolveReply
		if code := s.call(t, "GET", "/v1/resolve?ref="+parentID, "", &byID); code != 200 || byID.Resolved[0].By != "id" {
			t.Fatalf("by id: %d %+v", code, byID)
		}
		if code := s.call(t, "GET", "/v1/resolve?ref="+strings.ToUpper(parent.Name), "", &byName); code != 200 || byName.Resolved[0].By != "name" || byName.Resolved[0].Session.Session != parentID {
			t.Fatalf("by name: %d %+v", code, byName)
		}
		if code := s.call(t, "GET", "/v1/resolve?ref=release", "", &fuzzy); code != 200 || fuzzy.Resolved[0].By != "fuzzy" || fuzzy.Resolved[0].Session.Session != other {
			t.Fatalf("fuzzy: %d %+v", code, fuzzy)
		}
		if code := s.call(t, "GET", "/v1/resolve?ref="+kid.Name+"~2", "", &anc); code != 200 || len(anc.Resolved[0].Ancestors) != 1 || anc.Resolved[0].Ancestors[0].Session != parentID {
			t.Fatalf("ancestors: %d %+v", code, anc)
		}
		var problem struct {
			Type       string
			Detail     string
			Candidates []struct{ Session string }
		}
		if code := s.call(t, "GET", "/v1/resolve?ref=refactor", "", &problem); code != http.StatusConflict || len(problem.Candidates) != 2 || !strings.HasSuffix(problem.Type, "#ambiguous-reference") {
			t.Fatalf("ambiguous: %d %+v", code, problem)
		}
		if code := s.call(t, "GET", "/v1/resolve?ref=nothing-like-it", "", nil); code != http.StatusNotFound {
			t.Fatalf("unknown reference: %d", code)
		}
		var text events.ResolveReply
		body := `{"text": "Like @@` + parent.Name + ` did. @@` + other + `: which version?", "answer": true}`
		if code := s.call(t, "POST", "/v1/resolve", body, &text); code != 200 || len(text.Resolved) != 2 || text.Context == nil {
			t.Fatalf("text: %d %+v", code, text)
		}
		ctxText := text.Context.Content[0].Text
		if !strings.HasPrefix(ctxText, "<session-references>") || !strings.Contains(ctxText, parent.Summary[:20]) || text.Resolved[1].Answer == nil {
			t.Fatalf("context message: %s / %+v", ctxText, text.Resolved[1])
		}
	})

	t.Run("query", func(t *testing.T) {
		var q events.QueryReply
		code := s.call(t, "POST", "/v1/sessions/"+parent.Name+"/query", `{"question": "Which colour should the confirm button keep?"}`, &q)
		if code != 200 || q.Session != parentID || len(q.Sources) == 0 || !strings.Contains(q.Answer, "red") {
			t.Fatalf("query: %d %+v", code, q)
		}
		if code := s.call(t, "POST", "/v1/sessions/"+parent.Name+"/query", `{}`, nil); code != 400 {
			t.Fatalf("query without a question: %d", code)
		}
	})

	t.Run("a corrupt entry is missing until the next indexing rewrites it", func(t *testing.T) {
		kv, err := s.js.KeyValue(context.Background(), events.BucketIndex)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(context.Background(), events.MemoryKey(ingestsvc.DefaultTenant, other), []byte("{not json")); err != nil {
			t.Fatal(err)
		}
		if code := s.call(t, "GET", "/v1/sessions/"+other+"/index", "", nil); code != 404 {
			t.Fatalf("corrupt entry read: %d, want 404", code)
		}
		var r events.IndexReply
		if code := s.call(t, "POST", "/v1/sessions/"+other+"/index", "", &r); code != 200 || r.Outcome == nil || !r.Outcome.Success || r.Index.Name == "" {
			t.Fatalf("forced indexing over a corrupt entry: %d %+v", code, r)
		}
		s.waitIndexed(t, other)
	})
}

func TestIndexMalformedOutputRetriedThenFailed(t *testing.T) {
	fake := llmtest.NewAnthropic(t,
		llmtest.Reply{Text: "Here is the metadata you asked for."},
		llmtest.Reply{Text: `{"name": 5, "description": "x", "summary": "y", "tags": ["a"]}`},
		llmtest.Reply{Text: `{"name": "ok", "description": "x", "summary": "y"}`},
		llmtest.Reply{Text: "```json\n{\"name\": \"Billing Export\", \"description\": \"Exports invoices.\", \"summary\": \"The user asked for a CSV export.\", \"tags\": [\"Billing\", \"csv\", \"billing\"]}\n```", Usage: llmtest.Usage{Input: 1000, Output: 100}},
	)
	provider := llm.NewAnthropic(llm.ClientOptions{APIKey: "test", BaseURL: fake.BaseURL(), Model: "claude-haiku-4-5"})
	s := startIndexStack(t, provider)
	failed := make(chan *nats.Msg, 4)
	sub, err := s.nc.ChanSubscribe(events.EventsSubject(events.KindSessionIndexFailed, "*", "*"), failed)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	const session = "idx-billing"
	s.post(t, conversation(session, events.SessionStarted{}, "Export the invoices as CSV."))
	var r events.IndexReply
	if code := s.call(t, "POST", "/v1/sessions/"+session+"/index", "", &r); code != 200 || r.Outcome == nil {
		t.Fatalf("forced indexing: %d %+v", code, r)
	}
	if r.Outcome.Success || r.Outcome.Attempts != 3 || !strings.Contains(r.Outcome.Error, "missing field \"tags\"") {
		t.Fatalf("outcome after three malformed answers: %+v", r.Outcome)
	}
	select {
	case m := <-failed:
		if !strings.Contains(string(m.Data), `"attempts":3`) {
			t.Fatalf("index_failed event: %s", m.Data)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no dev.recall.session.index_failed event")
	}
	// The next indexing gets valid output (in a code fence): stored, priced.
	if code := s.call(t, "POST", "/v1/sessions/"+session+"/index", "", &r); code != 200 || !r.Outcome.Success {
		t.Fatalf("second forced indexing: %d %+v", code, r.Outcome)
	}
	if r.Index.Name != "billing-export" || strings.Join(r.Index.Tags, ",") != "billing,csv" || r.Outcome.CostUSD <= 0 {
		t.Fatalf("entry %+v, outcome %+v", r.Index, r.Outcome)
	}
	// A provider error is not retried by the indexing loop.
	fake.Enqueue(llmtest.Reply{Status: 400})
	if code := s.call(t, "POST", "/v1/sessions/"+session+"/index", "", &r); code != 200 || r.Outcome.Success || r.Outcome.Attempts != 1 {
		t.Fatalf("provider error: %d %+v", code, r.Outcome)
	}
	if fake.Calls() != 5 {
		t.Fatalf("model calls: %d, want 5", fake.Calls())
	}
}

// TestGoClientSessionIndex drives the session index through pkg/client
// over NATS: reindex, index, sessions, resolve (with the ambiguity's
// problem document), references and query.
func TestGoClientSessionIndex(t *testing.T) {
	s := startIndexStack(t, llm.NewOffline())
	s.post(t, conversation("gc-a", events.SessionStarted{}, "Refactor the payment webhook retries."))
	s.post(t, conversation("gc-b", events.SessionStarted{}, "Refactor the payment receipt emails."))
	c, err := client.New(s.js, ingestsvc.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Before indexing: nothing (404) or only the start facts.
	if r, err := c.Index(ctx, "gc-a"); !isCode(err, "404") && (err != nil || r.Index.Indexed()) {
		t.Fatalf("index before indexing: %+v %v", r, err)
	}
	for _, id := range []string{"gc-a", "gc-b"} {
		r, err := c.Reindex(ctx, id)
		if err != nil || !r.Outcome.Success || r.Index.Name == "" {
			t.Fatalf("reindex %s: %+v %v", id, r, err)
		}
	}
	got, err := c.Index(ctx, "gc-a")
	if err != nil || !strings.Contains(got.Index.Name, "webhook") {
		t.Fatalf("index: %+v %v", got, err)
	}
	list, err := c.Sessions(ctx, events.SessionsRequest{Q: "receipt"})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].Session != "gc-b" {
		t.Fatalf("sessions: %+v %v", list, err)
	}
	_, err = c.Resolve(ctx, "payment")
	var se *client.ServiceError
	if !errors.As(err, &se) || se.Code != "409" || !strings.Contains(string(se.Problem), `"candidates"`) {
		t.Fatalf("ambiguous resolve: %v", err)
	}
	res, err := c.Resolve(ctx, "webhook")
	if err != nil || res.Session.Session != "gc-a" || res.By != "fuzzy" {
		t.Fatalf("resolve: %+v %v", res, err)
	}
	refs, err := c.References(ctx, "As in @@"+got.Index.Name+", please.", false)
	if err != nil || refs.Context == nil || len(refs.Resolved) != 1 {
		t.Fatalf("references: %+v %v", refs, err)
	}
	q, err := c.Query(ctx, got.Index.Name, events.QueryRequest{Question: "What about the webhook retries?"})
	if err != nil || len(q.Sources) == 0 {
		t.Fatalf("query: %+v %v", q, err)
	}
}

func isCode(err error, code string) bool {
	var se *client.ServiceError
	return errors.As(err, &se) && se.Code == code
}

// waitIndexerRead waits until the indexer's consumer has acknowledged every
// record stored so far for session: what it decides about them is decided.
func (s *indexStack) waitIndexerRead(t *testing.T, session string) {
	t.Helper()
	ctx := context.Background()
	ts, subject := sessionStream(t, s.js, "default", session)
	last, err := ts.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 20*time.Second, "the indexer has read "+session, func() bool {
		c, err := ts.Consumer(ctx, events.DurableIndexer)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.AckFloor.Stream >= last.Sequence
	})
}
