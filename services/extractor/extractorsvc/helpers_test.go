package extractorsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// env is an embedded NATS with Recall provisioned.
type env struct {
	srv *natstest.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	log *slog.Logger
	// layout is the transcript's shards as provisioned.
	layout events.Layout

	mu     sync.Mutex
	events []*nats.Msg // lifecycle notifications seen
}

const testPartitions = 8

func newEnv(t *testing.T) *env {
	t.Helper()
	s := natstest.Start(t)
	nc, js := s.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pc := provision.Config{Partitions: testPartitions, MemoryStorage: true}
	if err := provision.Ensure(ctx, js, pc); err != nil {
		t.Fatal(err)
	}
	level := slog.LevelError
	if testing.Verbose() && os.Getenv("EXTRACTOR_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	e := &env{srv: s, nc: nc, js: js, layout: pc.Layout(), log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))}
	sub, err := nc.Subscribe(events.SubjectEventsRoot+".>", func(m *nats.Msg) {
		e.mu.Lock()
		e.events = append(e.events, m)
		e.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	nc.Flush()
	return e
}

// testConfig has small timeouts so that failover is fast.
func testConfig(worker string) Config {
	return Config{
		Config:         provision.Config{Partitions: testPartitions, MemoryStorage: true},
		WorkerID:       worker,
		AckWait:        2 * time.Second,
		PinnedTTL:      2 * time.Second,
		HeartbeatTTL:   2 * time.Second,
		FetchWait:      500 * time.Millisecond,
		StaleThreshold: 3 * time.Second,
		DrainTimeout:   5 * time.Second,
		Concurrency:    8,
		MaxAttempts:    3,
	}
}

// worker is a running Worker on its own connection.
type worker struct {
	w      *Worker
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan error
}

// startWorker runs a worker on its own connection until the test ends.
func (e *env) startWorker(t *testing.T, cfg Config, p llm.Provider) *worker {
	t.Helper()
	nc, err := nats.Connect(e.srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(nc, cfg, p, e.log)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := micro.AddService(nc, micro.Config{Name: ServiceName, Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.ServeSharing(svc); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wk := &worker{w: w, nc: nc, cancel: cancel, done: make(chan error, 1)}
	go func() { wk.done <- w.Run(ctx) }()
	t.Cleanup(func() { wk.stop(t) })
	return wk
}

// stop shuts the worker down cleanly.
func (wk *worker) stop(t *testing.T) {
	t.Helper()
	if wk.cancel == nil {
		return
	}
	wk.cancel()
	wk.cancel = nil
	select {
	case err := <-wk.done:
		if err != nil {
			t.Errorf("worker %s: %v", wk.w.ID(), err)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("worker %s did not stop", wk.w.ID())
	}
	wk.nc.Close()
}

// kill crashes the worker: the connection drops first, so nothing is
// cleaned up (no ack, no unpin, no membership delete).
func (wk *worker) kill() {
	if wk.cancel == nil {
		return
	}
	wk.nc.Close()
	wk.cancel()
	wk.cancel = nil
	<-wk.done
}

// waitOwned waits until the workers own all partitions between them.
func waitOwned(t *testing.T, ws ...*worker) {
	t.Helper()
	testpoll.Until(t, 15*time.Second, "partitions assigned", func() bool {
		n := 0
		for _, w := range ws {
			if len(w.w.Group().Members()) != len(ws) {
				return false
			}
			n += len(w.w.Group().Owned())
		}
		return n == testPartitions
	})

}

// appendMessages stores n alternating user/assistant messages on the
// session's transcript and returns their stream sequences.
func (e *env) appendMessages(t *testing.T, tenant, session string, n int) []uint64 {
	t.Helper()
	seqs, err := e.tryAppendMessages(tenant, session, n)
	if err != nil {
		t.Fatal(err)
	}
	return seqs
}

// tryAppendMessages is appendMessages for goroutines other than the test's
// (which must not call t.Fatal).
func (e *env) tryAppendMessages(tenant, session string, n int) ([]uint64, error) {
	var seqs []uint64
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s-%d-%d", session, time.Now().UnixNano(), i)
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		seq, err := e.tryAppend(tenant, session, events.Message{UUID: id, Role: role, Content: events.Content{{Type: events.BlockText, Text: fmt.Sprintf("%s message %d", role, i)}}})
		if err != nil {
			return nil, err
		}
		seqs = append(seqs, seq)
	}
	return seqs, nil
}

// tryAppend stores m (its UUID is the event id) on the session's
// transcript and returns its stream sequence.
func (e *env) tryAppend(tenant, session string, m events.Message) (uint64, error) {
	ev := event.New()
	ev.SetID(m.UUID)
	ev.SetSource("/test")
	ev.SetType(events.TypeMessage)
	ev.SetSubject(session)
	ev.SetExtension(events.ExtTenant, tenant)
	if err := ev.SetData(event.ApplicationJSON, m); err != nil {
		return 0, err
	}
	msg := natsce.NewMsg(e.layout.Subject(tenant, session), &ev)
	ack, err := e.js.PublishMsg(context.Background(), msg, jetstream.WithMsgID(events.DedupID(tenant, m.UUID)))
	if err != nil {
		return 0, fmt.Errorf("appending to %s: %w", session, err)
	}
	return ack.Sequence, nil
}

// request publishes an extraction request.
func (e *env) request(t *testing.T, tenant, session string, upTo uint64) {
	t.Helper()
	if err := e.tryRequest(tenant, session, upTo); err != nil {
		t.Fatal(err)
	}
}

// tryRequest is request for goroutines other than the test's.
func (e *env) tryRequest(tenant, session string, upTo uint64) error {
	r := events.ExtractionRequested{Tenant: tenant, Session: session, UpToSeq: upTo, Reason: "test"}
	ev := event.New()
	ev.SetID(r.RequestDedupID())
	ev.SetSource("/test")
	ev.SetType(events.TypeExtractionRequested)
	ev.SetSubject(session)
	ev.SetExtension(events.ExtTenant, tenant)
	if err := ev.SetData(event.ApplicationJSON, r); err != nil {
		return err
	}
	msg := natsce.NewMsg(events.ExtractSubject(tenant, session), &ev)
	if _, err := e.js.PublishMsg(context.Background(), msg, jetstream.WithMsgID(r.RequestDedupID())); err != nil {
		return fmt.Errorf("requesting %s up to %d: %w", session, upTo, err)
	}
	return nil
}

// notifications returns the data of the lifecycle notifications of kind.
func notifications[T any](e *env, kind string) []T {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []T
	for _, m := range e.events {
		if !strings.HasPrefix(m.Subject, events.SubjectEventsRoot+"."+kind+".") {
			continue
		}
		var v T
		if json.Unmarshal(m.Data, &v) == nil {
			out = append(out, v)
		}
	}
	return out
}

func (e *env) completed() []events.ExtractionCompleted {
	return notifications[events.ExtractionCompleted](e, events.KindExtractionCompleted)
}

func (e *env) failed() []events.ExtractionFailed {
	return notifications[events.ExtractionFailed](e, events.KindExtractionFailed)
}

func (e *env) memory(t *testing.T, tenant, session string) (events.MemoryRecord, uint64) {
	t.Helper()
	kv, err := e.js.KeyValue(context.Background(), events.BucketMemory)
	if err != nil {
		t.Fatal(err)
	}
	rec, rev, err := ReadMemory(context.Background(), kv, tenant, session)
	if err != nil {
		t.Fatal(err)
	}
	return rec, rev
}

func (e *env) statusExists(t *testing.T, tenant, session string) bool {
	t.Helper()
	kv, err := e.js.KeyValue(context.Background(), events.BucketStatus)
	if err != nil {
		t.Fatal(err)
	}
	_, err = kv.Get(context.Background(), events.MemoryKey(tenant, session))
	switch {
	case err == nil:
		return true
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return false
	default:
		t.Fatal(err)
		return false
	}
}
