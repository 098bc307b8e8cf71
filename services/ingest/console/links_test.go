package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/llm/prices"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/indexer/indexersvc"
	"github.com/recallhq/recall/services/ingest/console"
)

// linked is the part of a session page about other sessions.
type linked struct {
	Parent       *struct{ Session, Name string }
	Children     []struct{ Session, Name string }
	MoreChildren int `json:"more_children"`
	References   []struct {
		Session, Name, Ref string
		Ancestor           int
	}
}

// TestConsoleSessionLinks: a session page names its parent (with its
// name; from its session.started before the indexer has seen it), lists
// its children — the sessions whose index entry names it as
// parent, picked up as the index changes — and the sessions it
// referenced with @@, resolved where the indexer stored their
// <session-references>, as written where it did not.
func TestConsoleSessionLinks(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	ix, _ := f.js.KeyValue(ctx, events.BucketIndex)
	put := func(tenant, session, name, parent string) {
		t.Helper()
		b, _ := json.Marshal(events.SessionIndex{Tenant: tenant, Session: session, Name: name, ParentSession: parent})
		if _, err := ix.Put(ctx, events.MemoryKey(tenant, session), b); err != nil {
			t.Fatal(err)
		}
	}
	put("acme", "root", "the-root", "")
	put("acme", "mid", "the-middle", "root")
	put("acme", "kid-b", "kid-b-name", "mid")
	put("acme", "kid-a", "", "mid")
	put("beta", "kid-c", "", "mid") // another tenant's: not a child
	f.say(t, "acme", "mid", "m1", memory.SessionReferenceText([]memory.ReferenceItem{
		{Ref: "the-root~1", Session: "root", Name: "the-root"}, {Ref: "the-root~1", Session: "older", Ancestor: 1}}))
	f.say(t, "acme", "mid", "m2", "Continue what @@the-root~1 started; compare @@nowhere and @@the-root~1.")
	var p linked
	if code := f.get(t, "GET", "/console/api/tenants/acme/sessions/mid", "a", "", &p); code != 200 {
		t.Fatalf("session page: %d", code)
	}
	if p.Parent == nil || p.Parent.Session != "root" || p.Parent.Name != "the-root" {
		t.Fatalf("parent: %+v", p.Parent)
	}
	if len(p.Children) != 2 || p.Children[0].Session != "kid-a" || p.Children[1].Name != "kid-b-name" {
		t.Fatalf("children: %+v", p.Children)
	}
	want := `[{root the-root the-root~1 0} {older  the-root~1 1} {  nowhere 0}]`
	if got := fmt.Sprint(p.References); got != want {
		t.Fatalf("references: %s, want %s", got, want)
	}
	// The index changes: a child leaves (deleted), another arrives; the
	// next read of the page follows.
	if err := ix.Delete(ctx, events.MemoryKey("acme", "kid-a")); err != nil {
		t.Fatal(err)
	}
	put("acme", "kid-d", "", "mid")
	f.get(t, "GET", "/console/api/tenants/acme/sessions/mid", "a", "", &p)
	if len(p.Children) != 2 || p.Children[0].Session != "kid-b" || p.Children[1].Session != "kid-d" {
		t.Fatalf("children after the index changed: %+v", p.Children)
	}
	// A session the indexer has not seen yet: its parent is its
	// session.started's.
	e := event.New()
	e.SetID("start")
	e.SetSource("/test")
	e.SetType(events.TypeSessionStarted)
	_ = e.SetData("application/json", events.SessionStarted{ParentSession: "root"})
	if _, err := f.js.PublishMsg(ctx, natsce.NewMsg(f.layout.Subject("acme", "unindexed"), &e)); err != nil {
		t.Fatal(err)
	}
	p = linked{}
	if f.get(t, "GET", "/console/api/tenants/acme/sessions/unindexed", "a", "", &p); p.Parent == nil || p.Parent.Session != "root" || p.Parent.Name != "the-root" {
		t.Fatalf("the parent of a session not indexed yet: %+v", p.Parent)
	}
	p = linked{}
	f.say(t, "acme", "root", "m1", "hello")
	f.get(t, "GET", "/console/api/tenants/acme/sessions/root", "a", "", &p)
	if p.Parent != nil || len(p.Children) != 1 || p.Children[0].Name != "the-middle" || len(p.References) != 0 {
		t.Fatalf("the root's links: %+v", p)
	}
}

// TestConsoleIncomingReferences: a session page lists the sessions whose
// index entry records a reference to it (the indexer's "references"), by
// id, of its tenant only, at most 100 and how many more, followed as the
// index changes.
func TestConsoleIncomingReferences(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	ix, _ := f.js.KeyValue(ctx, events.BucketIndex)
	put := func(tenant, session, name string, refs ...string) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"tenant": tenant, "session": session, "name": name, "references": refs})
		if _, err := ix.Put(ctx, events.MemoryKey(tenant, session), b); err != nil {
			t.Fatal(err)
		}
	}
	put("acme", "x", "the-x", "other", "mid")
	put("acme", "y", "", "mid")
	put("acme", "w", "the-w", "other")
	put("beta", "z", "", "mid") // another tenant's
	f.say(t, "acme", "mid", "m1", "hello")
	page := func() (by []struct{ Session, Name string }, more int) {
		t.Helper()
		var p struct {
			ReferencedBy []struct{ Session, Name string } `json:"referenced_by"`
			More         int                              `json:"more_referenced_by"`
		}
		if code := f.get(t, "GET", "/console/api/tenants/acme/sessions/mid", "a", "", &p); code != 200 {
			t.Fatalf("session page: %d", code)
		}
		return p.ReferencedBy, p.More
	}
	if by, more := page(); fmt.Sprint(by, more) != "[{x the-x} {y }] 0" {
		t.Fatalf("referenced by: %v, %d more", by, more)
	}
	// y's entry no longer records it, x's is deleted, v's arrives.
	put("acme", "y", "the-y")
	if err := ix.Delete(ctx, events.MemoryKey("acme", "x")); err != nil {
		t.Fatal(err)
	}
	put("acme", "v", "", "mid")
	if by, _ := page(); fmt.Sprint(by) != "[{v }]" {
		t.Fatalf("after the index changed: %v", by)
	}
	for i := range 102 {
		put("acme", fmt.Sprintf("r%03d", i), "", "mid")
	}
	if by, more := page(); len(by) != 100 || more != 3 || by[0].Session != "r000" {
		t.Fatalf("103 referencing sessions: %d listed from %v, %d more", len(by), by[0], more)
	}
}

// TestConsoleIncomingReferencesFromTheIndexer: with the real indexer, a
// session whose transcript holds a <session-references> message naming
// another is listed on the other's page, without reading transcripts.
func TestConsoleIncomingReferencesFromTheIndexer(t *testing.T) {
	f := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- indexersvc.Run(ctx, indexersvc.Config{NATS: natsconn.Config{URL: f.nc.ConnectedUrl()}, Config: provision.Config{Partitions: 2},
			LLMConfig: indexersvc.LLMConfig{Provider: "offline"}}, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("indexer: %v", err)
		}
	})
	f.say(t, "acme", "planned", "m1", "Plan the parser.")
	f.say(t, "acme", "later", "m1", memory.SessionReferenceText([]memory.ReferenceItem{{Ref: "planned", Session: "planned"}}))
	f.say(t, "acme", "later", "m2", "Go on from @@planned.")
	testpoll.Until(t, 30*time.Second, "later listed as referencing planned", func() bool {
		var p struct {
			ReferencedBy []struct{ Session string } `json:"referenced_by"`
		}
		f.get(t, "GET", "/console/api/tenants/acme/sessions/planned", "a", "", &p)
		return len(p.ReferencedBy) == 1 && p.ReferencedBy[0].Session == "later"
	})
}

// TestConsoleExtractionCosts: each kept revision says what its extraction
// spent, from its extraction.completed notification (exact) or else from
// the difference of the running totals, priced by the table when the
// model has a price.
func TestConsoleExtractionCosts(t *testing.T) {
	f := start(t, func(c *console.Config) {
		c.Prices, _ = prices.Parse("test-model=2:10")
	})
	ctx := context.Background()
	f.say(t, "acme", "s1", "m1", "hello")
	kv, _ := f.js.KeyValue(ctx, events.BucketMemory)
	var revs []uint64
	for i, u := range []events.TokenUsage{
		{InputTokens: 1000, OutputTokens: 100},
		{InputTokens: 3000, OutputTokens: 300, CacheReadTokens: 500},
		{InputTokens: 3500, OutputTokens: 350, CacheReadTokens: 500},
	} {
		model := "test-model"
		if i == 2 {
			model = "unpriced-model"
		}
		b, _ := json.Marshal(events.MemoryRecord{Notes: "n", Extractions: i + 1, Usage: u, Model: model, CoveredSeq: 1})
		rev, err := kv.Put(ctx, "acme.s1", b)
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, rev)
	}
	// The second extraction's notification is kept: its numbers are its own.
	done, _ := json.Marshal(events.ExtractionCompleted{Tenant: "acme", Session: "s1", Revision: revs[1], Model: "test-model",
		Usage: events.TokenUsage{InputTokens: 2000, OutputTokens: 200, CacheReadTokens: 500}})
	if _, err := f.js.Publish(ctx, events.EventsSubject(events.KindExtractionCompleted, "acme", "s1"), done); err != nil {
		t.Fatal(err)
	}
	type spent struct {
		Usage       events.TokenUsage
		Model, From string
		CostUSD     *float64 `json:"cost_usd"`
		Extractions int
	}
	var page struct {
		Memory struct {
			CostUSD *float64 `json:"cost_usd"`
		}
		History []struct {
			Revision uint64
			Spent    *spent
		}
	}
	if code := f.get(t, "GET", "/console/api/tenants/acme/sessions/s1", "a", "", &page); code != 200 || len(page.History) != 3 {
		t.Fatalf("session page: %d %+v", code, page)
	}
	if page.History[0].Spent != nil {
		t.Fatalf("the oldest kept revision, without its notification: %+v", page.History[0].Spent)
	}
	costs := []float64{0, (2500*2 + 200*10) / 1e6}
	if s := page.History[1].Spent; s == nil || s.From != "event" || s.Usage.InputTokens != 2000 || s.CostUSD == nil || math.Abs(*s.CostUSD-costs[1]) > 1e-12 {
		t.Fatalf("the second extraction: %+v", s)
	}
	if s := page.History[2].Spent; s == nil || s.From != "difference" || s.Usage.InputTokens != 500 || s.Usage.OutputTokens != 50 || s.Model != "unpriced-model" || s.CostUSD != nil || s.Extractions != 1 {
		t.Fatalf("the third extraction (no notification, no price): %+v", s)
	}
	if page.Memory.CostUSD != nil {
		t.Fatalf("the memory's total priced at an unknown model: %v", *page.Memory.CostUSD)
	}
}

// TestConsoleContextEdit: the console asks the compactor which blocks a
// context edit would clear (recall.api.edit.<tenant>.<session>) and
// answers its reply; a malformed request is refused before it is sent,
// and without a compactor the answer is 503.
func TestConsoleContextEdit(t *testing.T) {
	f := start(t)
	if code := f.get(t, "POST", "/console/api/tenants/acme/sessions/s1/edit", "a", "", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("without a compactor: %d", code)
	}
	asked := make(chan []byte, 1)
	sub, err := f.nc.Subscribe(events.APISubject(events.VerbEdit, "acme", "s1"), func(m *nats.Msg) {
		asked <- m.Data
		reply, _ := json.Marshal(events.EditReply{Clear: []events.ClearedBlock{{UUID: "r1", Seq: 7, Block: 0, Kind: events.ClearToolResult, Action: events.ActionReplace, Tokens: 1990}}, TokensBefore: 5000, TokensAfter: 3010})
		_ = m.Respond(reply)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	body := `{"context_management":{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":1000},"keep":{"type":"tool_uses","value":1}}]}}`
	var got events.EditReply
	if code := f.get(t, "POST", "/console/api/tenants/acme/sessions/s1/edit", "a", body, &got); code != 200 || len(got.Clear) != 1 || got.Clear[0].Seq != 7 || got.TokensAfter != 3010 {
		t.Fatalf("edit: %d %+v", code, got)
	}
	select {
	case b := <-asked:
		var req events.EditRequest
		if err := json.Unmarshal(b, &req); err != nil || req.ContextManagement == nil || req.ContextManagement.Edits[0].Trigger.Value != 1000 {
			t.Fatalf("the compactor was asked %s (%v)", b, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the compactor was not asked")
	}
	for _, bad := range []string{`{"context_management":{"edits":[{"type":"nope"}]}}`, `{"unknown":1}`} {
		if code := f.get(t, "POST", "/console/api/tenants/acme/sessions/s1/edit", "a", bad, nil); code != http.StatusBadRequest {
			t.Errorf("%s: %d", bad, code)
		}
	}
	if code := f.get(t, "POST", "/console/api/tenants/acme/sessions/s1/edit", "b", "", nil); code != http.StatusForbidden {
		t.Fatalf("beta asking about acme's session: %d", code)
	}
}

// TestConsoleWhoamiCountsLiveStreams: whoami says how many live streams
// the edge holds for the token's tenant, so a page (and the browser test)
// can check that a page it left holds none.
func TestConsoleWhoamiCountsLiveStreams(t *testing.T) {
	f := start(t)
	var who struct {
		LiveStreams int `json:"live_streams"`
	}
	if f.get(t, "GET", "/console/api/whoami", "a", "", &who); who.LiveStreams != 0 {
		t.Fatalf("before any stream: %d", who.LiveStreams)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.url+"/console/api/live", nil)
	req.Header.Set("Authorization", "Bearer a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if f.get(t, "GET", "/console/api/whoami", "a", "", &who); who.LiveStreams != 1 {
		t.Fatalf("with a stream open: %d", who.LiveStreams)
	}
	if f.get(t, "GET", "/console/api/whoami", "b", "", &who); who.LiveStreams != 0 {
		t.Fatalf("another tenant's count: %d", who.LiveStreams)
	}
	resp.Body.Close()
	cancel()
	testpoll.Until(t, 5*time.Second, "the closed stream to stop counting", func() bool {
		f.get(t, "GET", "/console/api/whoami", "a", "", &who)
		return who.LiveStreams == 0
	})
}
