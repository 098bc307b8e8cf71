package microapi_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/testpoll"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// serveLater serves subject through later.Go with work.
func serveLater(t *testing.T, nc *nats.Conn, later *microapi.Later, subject string, work func(ctx context.Context, body string) (any, *microapi.Error)) {
	t.Helper()
	svc, err := micro.AddService(nc, micro.Config{Name: "later-stop", Version: "1.0.0", StatsHandler: later.Stats})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	err = svc.AddEndpoint("work", micro.HandlerFunc(func(req micro.Request) {
		body := string(req.Data())
		later.Go(req, "work", nil, "", func(ctx context.Context) (any, *microapi.Error) { return work(ctx, body) })
	}), micro.WithEndpointSubject(subject))
	if err == nil {
		err = nc.Flush() // the endpoint is subscribed before a client asks
	}
	if err != nil {
		t.Fatal(err)
	}
}

// request sends body in the background; the channel has the answer (nil
// when none came within timeout).
func request(nc *nats.Conn, subject, body string, timeout time.Duration) <-chan *nats.Msg {
	ch := make(chan *nats.Msg, 1)
	go func() {
		m, err := nc.Request(subject, []byte(body), timeout)
		if err != nil {
			m = nil
		}
		ch <- m
	}()
	return ch
}

// TestLaterPanicAnswers500: a panic in work answers 500 and the endpoint
// keeps serving.
func TestLaterPanicAnswers500(t *testing.T) {
	s := natstest.Start(t)
	nc, _ := s.Connect(t)
	later := microapi.NewLater(context.Background(), nc, quiet, 0)
	serveLater(t, nc, later, "later.panic", func(_ context.Context, body string) (any, *microapi.Error) {
		if body == "panic" {
			panic("a bug below the handler")
		}
		return map[string]string{"ok": body}, nil
	})
	m, err := nc.Request("later.panic", []byte("panic"), 5*time.Second)
	if err != nil || m.Header.Get(micro.ErrorCodeHeader) != "500" {
		t.Fatalf("a panicking request: %v %v", err, m)
	}
	m, err = nc.Request("later.panic", []byte("next"), 5*time.Second)
	if err != nil || m.Header.Get(micro.ErrorCodeHeader) != "" || string(m.Data) != `{"ok":"next"}` {
		t.Fatalf("the next request: %v %v", err, m)
	}
	if st := later.Snapshot("work"); st.NumRequests != 2 || st.NumErrors != 1 || st.InFlight != 0 {
		t.Fatalf("stats: %+v", st)
	}
}

// TestLaterStopWaitsForAnswers: when the run context ends, work in flight
// gets the grace and is answered before Stop returns; work that outlives
// the grace is cancelled and its answer (from the cancellation) is sent
// before Stop returns too; after Stop a request is refused 503.
func TestLaterStopWaitsForAnswers(t *testing.T) {
	s := natstest.Start(t)
	nc, _ := s.Connect(t)
	client, _ := s.Connect(t)
	runCtx, stopRun := context.WithCancel(context.Background())
	later := microapi.NewLater(runCtx, nc, quiet, 300*time.Millisecond)
	finish := make(chan struct{})
	serveLater(t, nc, later, "later.stop", func(ctx context.Context, body string) (any, *microapi.Error) {
		if body == "quick" {
			<-finish // ends within the grace
			return map[string]string{"ok": body}, nil
		}
		<-ctx.Done() // ends only when cancelled
		return nil, microapi.Fail(503, "stopping: %v", ctx.Err())
	})
	quick := request(client, "later.stop", "quick", 10*time.Second)
	slow := request(client, "later.stop", "slow", 10*time.Second)
	testpoll.Until(t, 5*time.Second, "both requests in flight", func() bool { return later.Snapshot("work").InFlight == 2 })
	stopRun()
	stopped := make(chan struct{})
	go func() { later.Stop(context.Background()); close(stopped) }()
	close(finish)
	<-stopped
	if m := <-quick; m == nil || m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("the request that ended within the grace: %v", m)
	}
	if m := <-slow; m == nil || m.Header.Get(micro.ErrorCodeHeader) != "503" {
		t.Fatalf("the request cancelled after the grace: %v", m)
	}
	m, err := client.Request("later.stop", []byte("quick"), 5*time.Second)
	if err != nil || m.Header.Get(micro.ErrorCodeHeader) != "503" || m.Header.Get("Retry-After") == "" {
		t.Fatalf("a request after Stop: %v %v", err, m)
	}
}

// TestLaterNeverAnswersAfterStop: work that ignores its cancellation is
// not waited for past Stop's bound, and its answer, ready after Stop
// returned, is never sent.
func TestLaterNeverAnswersAfterStop(t *testing.T) {
	s := natstest.Start(t)
	nc, _ := s.Connect(t)
	client, _ := s.Connect(t)
	runCtx, stopRun := context.WithCancel(context.Background())
	later := microapi.NewLater(runCtx, nc, quiet, 0)
	release, returned := make(chan struct{}), make(chan struct{})
	serveLater(t, nc, later, "later.stuck", func(context.Context, string) (any, *microapi.Error) {
		<-release // deaf to cancellation
		defer close(returned)
		return map[string]string{"late": "yes"}, nil
	})
	answer := request(client, "later.stuck", "x", 3*time.Second)
	testpoll.Until(t, 5*time.Second, "the request in flight", func() bool { return later.Snapshot("work").InFlight == 1 })
	stopRun()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	later.Stop(ctx)
	close(release)
	<-returned
	if m := <-answer; m != nil {
		t.Fatalf("answered after Stop returned: %s", m.Data)
	}
}
