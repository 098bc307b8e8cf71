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

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
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
	e := event.New()
	e.SetID("s1-u1")
	e.SetSource("/test")
	e.SetType(events.TypeMessage)
	e.SetSubject("s1")
	e.SetExtension(events.ExtTenant, "acme")
	_ = e.SetData(event.ApplicationJSON, events.Message{UUID: "u1", Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "Index me."}}})
	if _, err := js.PublishMsg(ctx, natsce.NewMsg(testLayout.Subject("acme", "s1"), &e)); err != nil {
		t.Fatal(err)
	}
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
	// Both replicas serve the endpoint.
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := nc.Request("$SRV.INFO."+ServiceName, nil, time.Second)
		if err == nil && len(info.Data) > 0 {
			var n int
			for range 10 {
				if _, err := nc.Request("$SRV.PING."+ServiceName, nil, 200*time.Millisecond); err == nil {
					n++
				}
			}
			if n > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the indexers did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the second replica's endpoint
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
