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

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// inputModel answers valid metadata and keeps the conversation of its last
// call.
type inputModel struct {
	mu   sync.Mutex
	last string
}

func (*inputModel) Name() string  { return "input" }
func (*inputModel) Model() string { return "input-1" }
func (m *inputModel) Complete(_ context.Context, r llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	m.last = memory.RequestText(&r.Messages[0])
	m.mu.Unlock()
	return &llm.Response{Text: `{"name":"long-session","description":"d","summary":"s","tags":["t"]}`, Model: "input-1"}, nil
}

// A long session is read from the tail its last indexing kept
// (SessionIndex.ReadFromSeq), and the model sees what a read of the whole
// transcript gives; the session's facts from its first records stay. An
// indexer keeping more input reads the whole session again.
func TestLongSessionIndexedFromItsTail(t *testing.T) {
	srv, nc, js, prov := provisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, s1 := 0, eventtest.NewSession("acme", "s1")
	publish := func(count int) {
		for range count {
			n++
			role, model := events.RoleUser, ""
			if n%2 == 0 {
				role, model = events.RoleAssistant, "first-model"
			}
			eventtest.Publish(ctx, t, js, testLayout, s1.Message(fmt.Sprint(n), events.Message{UUID: fmt.Sprintf("u%d", n), Role: role, Model: model,
				Content: eventtest.Text(fmt.Sprintf("message %d %s", n, strings.Repeat("x", 40)))}))
		}
	}
	model := &inputModel{}
	start := func(maxInput int) (stop func()) {
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = Run(runCtx, Config{NATS: natsconn.Config{URL: srv.ClientURL()}, Config: prov, Provider: model, MaxInputBytes: maxInput,
				MinNewUserMessages: 1000}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		}()
		return func() { cancel(); <-done }
	}
	stop := start(300)
	defer func() { stop() }()
	reindex := func() events.SessionIndex {
		t.Helper()
		var r events.IndexReply
		testpoll.Until(t, 20*time.Second, "a forced indexing", func() bool {
			m, err := chunked.Request(ctx, nc, events.APISubject(events.VerbReindex, "acme", "s1"), nil, nil)
			return err == nil && m.Header.Get("Nats-Service-Error-Code") == "" && json.Unmarshal(m.Data, &r) == nil && r.Outcome != nil && r.Outcome.Success
		})
		return r.Index
	}

	publish(60)
	first := reindex()
	if first.ReadFromSeq <= 1 || first.Model != "first-model" || first.CreatedAt.IsZero() {
		t.Fatalf("after indexing 60 records: read_from_seq %d, model %q, created %v", first.ReadFromSeq, first.Model, first.CreatedAt)
	}
	publish(1) // fewer bytes than the input keeps: it starts in the old tail
	second := reindex()
	recs, err := transcript.NewReader(nc, testLayout).Read(ctx, "acme", "s1", 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*events.Message
	for _, r := range recs {
		msgs = append(msgs, r.Message)
	}
	sawWhole := func(maxInput int) {
		t.Helper()
		want := "<conversation>\n" + memory.IndexInput(msgs, maxInput) + "\n</conversation>"
		model.mu.Lock()
		got := model.last
		model.mu.Unlock()
		if got != want {
			t.Fatalf("read from seq %d the model saw\n%s\nthe whole transcript gives\n%s", first.ReadFromSeq, got, want)
		}
	}
	sawWhole(300)
	if second.ReadFromSeq < first.ReadFromSeq || !second.CreatedAt.Equal(first.CreatedAt) || second.Model != "first-model" {
		t.Fatalf("second indexing: read_from_seq %d (first %d), created %v (first %v), model %q",
			second.ReadFromSeq, first.ReadFromSeq, second.CreatedAt, first.CreatedAt, second.Model)
	}

	// A larger input limit widens the tail: the session is read whole again.
	stop()
	stop = start(100_000)
	wide := reindex()
	sawWhole(100_000)
	if wide.ReadFromSeq > recs[0].Seq || wide.ReadFromBytes != 100_000 {
		t.Fatalf("after the wide indexing: read_from_seq %d (first record %d), read_from_bytes %d", wide.ReadFromSeq, recs[0].Seq, wide.ReadFromBytes)
	}
}
