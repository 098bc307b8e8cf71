package indexersvc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// TestReferencedSessionsReadsWhatResolveWrites: the sessions of a
// <session-references> message as memory.SessionReferenceText writes it —
// unnamed ones and ancestors included, each once — and nothing from a
// summary's heading that does not follow a blank line.
func TestReferencedSessionsReadsWhatResolveWrites(t *testing.T) {
	text := memory.SessionReferenceText([]memory.ReferenceItem{
		{Ref: "plan~1", Session: "s-plan", Name: "plan", Summary: "Has a list:\n## not (session s-fake)"},
		{Ref: "plan~1", Session: "s-epic", Ancestor: 1},
		{Ref: "s-plan", Session: "s-plan", Name: "plan", Question: "why?", Answer: "because"},
		{Ref: "bad", Session: "not valid!", Name: "x"},
	})
	if got := referencedSessions(text); !slices.Equal(got, []string{"s-plan", "s-epic"}) {
		t.Fatalf("referencedSessions = %q of\n%s", got, text)
	}
	if got := referencedSessions("@@plan: hello"); got != nil {
		t.Fatalf("a plain message: %q", got)
	}
}

// TestReferEachOnceBounded: an entry records a referenced session once,
// never itself, and at most maxReferences.
func TestReferEachOnceBounded(t *testing.T) {
	v := stored{SessionIndex: events.SessionIndex{Session: "me"}}
	if !v.refer([]string{"a", "me", "b", "a"}) || !slices.Equal(v.References, []string{"a", "b"}) {
		t.Fatalf("references: %q", v.References)
	}
	if v.refer([]string{"b", "me"}) {
		t.Fatal("nothing new was reported as added")
	}
	for i := range 2 * maxReferences {
		v.refer([]string{fmt.Sprint("s", i)})
	}
	if len(v.References) != maxReferences || v.References[0] != "a" {
		t.Fatalf("%d references, first %q", len(v.References), v.References[0])
	}
}

// TestReferencesRecordedAsTheyArrive: the indexer records in a session's
// index entry the sessions its <session-references> messages name, as
// they arrive (creating the entry when the session has none yet); an
// indexing keeps them, and one that reads the whole transcript (the entry
// lost) records them again. The API's reply does not carry them.
func TestReferencesRecordedAsTheyArrive(t *testing.T) {
	srv, nc, js, prov := provisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = Run(runCtx, Config{NATS: natsconn.Config{URL: srv.ClientURL()}, Config: prov, Provider: &slowModel{}, Timeout: 10 * time.Second}, log)
	}()
	defer func() { stop(); <-done }()
	s := eventtest.NewSession("acme", "a")
	refs := func(ids ...string) string {
		var items []memory.ReferenceItem
		for _, id := range ids {
			items = append(items, memory.ReferenceItem{Ref: id, Session: id, Name: "name-of-" + id})
		}
		return memory.SessionReferenceText(items)
	}
	eventtest.Publish(ctx, t, js, testLayout, s.User("r1", refs("b", "a")), s.User("q1", "Go on from @@b."),
		s.User("r2", refs("b", "c")))
	kv, err := js.KeyValue(ctx, events.BucketIndex)
	if err != nil {
		t.Fatal(err)
	}
	var got stored
	read := func() {
		got = stored{}
		if e, err := kv.Get(ctx, events.MemoryKey("acme", "a")); err == nil {
			_ = json.Unmarshal(e.Value(), &got)
		}
	}
	testpoll.Until(t, 30*time.Second, "a's references recorded", func() bool {
		read()
		return slices.Equal(got.References, []string{"b", "c"})
	})
	if got.CreatedAt.IsZero() || got.Tenant != "acme" || got.Session != "a" {
		t.Fatalf("the entry the references created: %+v", got)
	}
	m, err := chunked.Request(ctx, nc, events.APISubject(events.VerbReindex, "acme", "a"), nil, nil)
	var r events.IndexReply
	if err != nil || m.Header.Get("Nats-Service-Error-Code") != "" || json.Unmarshal(m.Data, &r) != nil || r.Index.Name != "slow-session" {
		t.Fatalf("reindex: %v %v", err, m)
	}
	if read(); got.Name != "slow-session" || !slices.Equal(got.References, []string{"b", "c"}) {
		t.Fatalf("after an indexing: name %q, references %q", got.Name, got.References)
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(m.Data, &raw) != nil || json.Unmarshal(raw["index"], &raw) != nil || raw["references"] != nil {
		t.Fatalf("the API's reply carries the references: %s", m.Data)
	}
	if err := kv.Purge(ctx, events.MemoryKey("acme", "a")); err != nil {
		t.Fatal(err)
	}
	if m, err := chunked.Request(ctx, nc, events.APISubject(events.VerbReindex, "acme", "a"), nil, nil); err != nil || m.Header.Get("Nats-Service-Error-Code") != "" {
		t.Fatalf("reindex without an entry: %v %v", err, m)
	}
	if read(); got.Name != "slow-session" || !slices.Equal(got.References, []string{"b", "c"}) {
		t.Fatalf("re-derived: name %q, references %q", got.Name, got.References)
	}
}
