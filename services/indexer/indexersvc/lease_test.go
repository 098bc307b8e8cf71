package indexersvc

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
)

// slowModel answers valid metadata slowly and records how many calls
// overlapped.
type slowModel struct {
	active, most atomic.Int32
	calls        atomic.Int32
}

func (*slowModel) Name() string  { return "slow" }
func (*slowModel) Model() string { return "slow-1" }
func (m *slowModel) Complete(ctx context.Context, _ llm.Request) (*llm.Response, error) {
	m.calls.Add(1)
	n := m.active.Add(1)
	defer m.active.Add(-1)
	for {
		most := m.most.Load()
		if n <= most || m.most.CompareAndSwap(most, n) {
			break
		}
	}
	select {
	case <-time.After(150 * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &llm.Response{Text: `{"name":"slow-session","description":"d","summary":"s","tags":["t"]}`, Model: "slow-1"}, nil
}

// TestOneIndexingAtATimeAcrossReplicas: forced indexings of one session sent
// to two replicas at once run one after the other (the lease), and each
// succeeds (a tenant may have all six in flight on one replica here).
func TestOneIndexingAtATimeAcrossReplicas(t *testing.T) {
	srv, nc, js, prov := provisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	eventtest.Publish(ctx, t, js, testLayout, eventtest.NewSession("acme", "s1").User("u1", "Index me."))
	model := &slowModel{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = Run(runCtx, Config{NATS: natsconn.Config{URL: srv.ClientURL()}, Config: prov, Provider: model, Timeout: 10 * time.Second,
				TenantRequests: 6}, log)
		}()
	}
	defer func() { stop(); wg.Wait() }()
	testpoll.Until(t, 20*time.Second, "both replicas serving", func() bool { return serving(t, nc, ServiceName) == 2 })
	const forced = 6
	var ok atomic.Int32
	var rg sync.WaitGroup
	for range forced {
		rg.Add(1)
		go func() {
			defer rg.Done()
			m, err := chunked.Request(ctx, nc, events.APISubject(events.VerbReindex, "acme", "s1"), nil, nil)
			if err != nil || m.Header.Get("Nats-Service-Error-Code") != "" {
				t.Errorf("reindex: %v %v", err, m)
				return
			}
			var r events.IndexReply
			if json.Unmarshal(m.Data, &r) == nil && r.Outcome != nil && r.Outcome.Success {
				ok.Add(1)
			}
		}()
	}
	rg.Wait()
	if ok.Load() != forced || model.calls.Load() != forced || model.most.Load() != 1 {
		t.Fatalf("%d of %d succeeded, %d model calls, at most %d at once (want 1)", ok.Load(), forced, model.calls.Load(), model.most.Load())
	}
	// The lease is released: nothing is left under leases.
	kv, _ := js.KeyValue(ctx, events.BucketIndex)
	if _, err := kv.Get(ctx, leaseKey("acme", "s1")); err != jetstream.ErrKeyNotFound && err != jetstream.ErrKeyDeleted {
		t.Fatalf("lease left behind: %v", err)
	}
}

// serving is how many instances of the micro service name answer a ping
// within 200 ms.
func serving(t *testing.T, nc *nats.Conn, name string) int {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$SRV.PING."+name, inbox, nil); err != nil {
		return 0
	}
	ids := map[string]bool{}
	for {
		m, err := sub.NextMsg(200 * time.Millisecond)
		if err != nil {
			return len(ids)
		}
		var ping struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(m.Data, &ping) == nil {
			ids[ping.ID] = true
		}
	}
}

// provisioned starts an embedded server with Recall's streams and buckets
// (two partitions).
func provisioned(t *testing.T) (*natstest.Server, *nats.Conn, jetstream.JetStream, provision.Config) {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := srv.Connect(t)
	prov := provision.Config{Partitions: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := provision.Ensure(ctx, js, prov); err != nil {
		t.Fatal(err)
	}
	return srv, nc, js, prov
}
