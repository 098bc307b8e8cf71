package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/indexer/indexersvc"
	"github.com/recallhq/recall/services/longterm/longtermsvc"
)

// TestSessionOwnerIsTheFirstStart: a session whose second session.started
// names another user keeps its first user as owner, in the session index
// and in long-term memory alike (they disagreed: the index took the last).
func TestSessionOwnerIsTheFirstStart(t *testing.T) {
	e := startEdge(t, 2)
	e.run(func(ctx context.Context) error {
		return longtermsvc.Run(ctx, longtermsvc.Config{NATS: e.ncfg, Config: e.prov, Provider: llm.NewOffline(), ID: "lt-1",
			HeartbeatTTL: 2 * time.Second, Timeout: 20 * time.Second, CommitWait: 20 * time.Second}, e.log)
	})
	e.run(func(ctx context.Context) error {
		return indexersvc.Run(ctx, indexersvc.Config{NATS: e.ncfg, Config: e.prov, Provider: llm.NewOffline(), Timeout: 20 * time.Second, ReindexWait: 20 * time.Second}, e.log)
	})
	e.ping(t, longtermsvc.ServiceName)
	e.ping(t, indexersvc.ServiceName)
	s := e.indexStack
	committed := make(chan *nats.Msg, 16)
	sub, err := s.nc.ChanSubscribe(events.EventsSubject(events.KindMemoryCommitted, "*", "own"), committed)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	evs := []map[string]any{
		lifecycleEvent("own", "start", events.TypeSessionStarted, events.SessionStarted{UserID: "alice", MemoryPolicy: policy(true, false)}),
		said("own", "m1", "", "I prefer short answers."),
		lifecycleEvent("own", "start-2", events.TypeSessionStarted, events.SessionStarted{UserID: "mallory", MemoryPolicy: policy(true, false)}),
		said("own", "m2", "", "Let's use Postgres."),
	}
	evs = append(evs, toolRound("own", "x")...)
	evs = append(evs, lifecycleEvent("own", "end", events.TypeSessionEnded, events.SessionEnded{}))
	s.post(t, evs)
	select {
	case m := <-committed:
		var out events.MemoryCommitted
		_ = json.Unmarshal(m.Data, &out)
		if out.User != "alice" {
			t.Fatalf("long-term memory committed for %q, want alice", out.User)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no memory.committed")
	}
	if got := s.waitIndexed(t, "own"); got.UserID != "alice" {
		t.Fatalf("the index says the owner is %q, want alice", got.UserID)
	}
}
