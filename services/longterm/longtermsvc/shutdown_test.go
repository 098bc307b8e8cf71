package longtermsvc

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// hungProvider answers no model call until its context ends.
type hungProvider struct {
	started, cancelled chan struct{}
	once               sync.Once
}

func (p *hungProvider) Name() string  { return "hung" }
func (p *hungProvider) Model() string { return "hung-1" }
func (p *hungProvider) Complete(ctx context.Context, _ llm.Request) (*llm.Response, error) {
	p.once.Do(func() { close(p.started) })
	<-ctx.Done()
	close(p.cancelled)
	return nil, ctx.Err()
}

// TestCommitInFlightAtShutdown: an explicit commit waiting on its model
// when Run's context ends is cancelled and answered (503, retry) before the
// connection drains, and its model call does not outlive Run. (The commit
// used to run on context.Background(): it outlived Run and its answer went
// to a closed connection, so the requester heard nothing.)
func TestCommitInFlightAtShutdown(t *testing.T) {
	srv := natstest.Start(t)
	p := &hungProvider{started: make(chan struct{}), cancelled: make(chan struct{})}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	cfg := Config{NATS: natsconn.Config{URL: srv.ClientURL()}, Config: provision.Config{Partitions: 2, MemoryStorage: true},
		Provider: p, ID: "lt-1", HeartbeatTTL: 2 * time.Second}
	returned := make(chan error, 1)
	go func() { returned <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
	nc, js := srv.Connect(t, nats.CustomInboxPrefix(events.InboxPrefix("acme")))
	testpoll.Until(t, 20*time.Second, "the long-term memory service to serve", func() bool {
		_, err := nc.Request("$SRV.PING."+ServiceName, nil, 200*time.Millisecond)
		return err == nil
	})
	s := eventtest.NewSession("acme", "s1")
	eventtest.Publish(ctx, t, js, testLayout, s.Started("start", events.SessionStarted{UserID: "u1"}), s.User("m1", "I prefer tabs over spaces."))
	answer := make(chan *nats.Msg, 1)
	go func() {
		m, err := nc.Request(events.APISubject(events.VerbCommit, "acme", "s1"), nil, 30*time.Second)
		if err != nil {
			t.Logf("the commit request: %v", err)
		}
		answer <- m
	}()
	select {
	case <-p.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the commit never reached the model")
	}
	stop()
	select {
	case err := <-returned:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
	select {
	case <-p.cancelled:
	default:
		t.Fatal("the commit's model call outlived Run")
	}
	// Answered before the connection closed: a failed commit (announced,
	// its outcome says why) or a 503 to retry.
	m := <-answer
	if m == nil {
		t.Fatal("the commit in flight at shutdown was never answered")
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		if code != "503" || m.Header.Get("Retry-After") == "" {
			t.Fatalf("the commit in flight at shutdown: %s %s, want a 503 with Retry-After", code, m.Header.Get(micro.ErrorHeader))
		}
		return
	}
	var out events.MemoryCommitted
	if err := json.Unmarshal(m.Data, &out); err != nil || out.Success || out.Error == "" {
		t.Fatalf("the commit in flight at shutdown: %s, want a failure that says why", m.Data)
	}
}
