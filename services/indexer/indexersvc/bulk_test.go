package indexersvc

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
)

// TestConcurrentLargeQueriesStayBounded: 30 questions at once with
// budget_tokens 1e9 over three 3 MB sessions are all answered, within the
// cap, with no slow consumer on the server, and the live heap grows by a
// bounded amount (the reads hold a budget's worth each, not a session).
func TestConcurrentLargeQueriesStayBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes 9 MB")
	}
	model := newQueryModel()
	sessions := []string{"acme/big1", "acme/big2", "globex/big3"}
	f := startFair(t, Config{Provider: model, TenantRequests: 30, Requests: 30}, sessions, 300, 10000)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	stop := make(chan struct{})
	go func() {
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
		}
	}()
	began := time.Now()
	var wg sync.WaitGroup
	var answered atomic.Int32
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tenant, session := "acme", fmt.Sprintf("big%d", i%2+1)
			if i%3 == 2 {
				tenant, session = "globex", "big3"
			}
			b, _ := json.Marshal(events.QueryRequest{Question: "what?", BudgetTokens: 1e9})
			m, err := chunked.Request(f.ctx, f.nc, events.APISubject(events.VerbQuery, tenant, session), nil, b)
			var r events.QueryReply
			if err != nil || code(m) != "" || json.Unmarshal(m.Data, &r) != nil || r.InputTokens > DefaultQueryMaxBudgetTokens {
				t.Errorf("query %d: %v %v", i, err, m)
				return
			}
			answered.Add(1)
		}()
	}
	wg.Wait()
	close(stop)
	growth := int64(peak.Load()) - int64(before.HeapAlloc)
	t.Logf("30 questions over 3 × 3 MB: %d answered in %s, live heap +%.1f MiB at peak, %d slow consumers",
		answered.Load(), time.Since(began).Round(time.Millisecond), float64(growth)/(1<<20), f.srv.NumSlowConsumers())
	if n := f.srv.NumSlowConsumers(); n != 0 {
		t.Fatalf("%d slow consumers on the server", n)
	}
	if growth > 256<<20 {
		t.Fatalf("live heap grew by %d MiB", growth>>20)
	}
}
