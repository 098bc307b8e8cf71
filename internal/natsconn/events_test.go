package natsconn_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/testpoll"
)

// syncBuffer is a log sink safe for the connection's callback goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestConnectionEventsAreLogged: a subscription that falls behind, a server
// restart — each is logged (and counted) instead of passing in silence.
func TestConnectionEventsAreLogged(t *testing.T) {
	srv := natstest.Start(t)
	var out syncBuffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	nc, err := natsconn.ConnectLogged(natsconn.Config{URL: srv.ClientURL()}, "recall-test", log)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	block := make(chan struct{})
	sub, err := nc.Subscribe("bulk", func(*nats.Msg) { <-block })
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(10, 1<<20); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if err := nc.Publish("bulk", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc.Flush()
	testpoll.Until(t, 10*time.Second, "the slow consumer is logged", func() bool {
		return strings.Contains(out.String(), "slow consumer") && strings.Contains(out.String(), "subject=bulk")
	})
	close(block)

	srv.Restart(t)
	testpoll.Until(t, 20*time.Second, "the disconnect and the reconnect are logged", func() bool {
		s := out.String()
		return strings.Contains(s, "NATS disconnected") && strings.Contains(s, "NATS reconnected") && strings.Contains(s, "conn=recall-test")
	})
}
