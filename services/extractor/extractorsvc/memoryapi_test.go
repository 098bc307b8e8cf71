package extractorsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
)

// TestMemoryReadsAdmitPerTenant: a tenant that floods the memory endpoint
// with reads of a large document is refused with 429 over its share, and
// another tenant's read, asked behind the whole flood, is answered (before,
// the endpoint answered in micro's handler, one read at a time for every
// tenant, and never refused).
func TestMemoryReadsAdmitPerTenant(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	kv, _ := e.js.KeyValue(ctx, events.BucketMemory)
	later := microapi.NewLater(ctx, e.nc, slog.Default(), 0)
	svc, err := serveMemoryAPI(later, kv)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	big, _ := json.Marshal(events.MemoryRecord{Notes: strings.Repeat("x", 1<<20-4096), CoveredSeq: 9})
	for _, key := range []string{events.MemoryKey("acme", "s1"), events.MemoryKey("globex", "g1")} {
		if _, err := kv.Put(ctx, key, big); err != nil {
			t.Fatal(err)
		}
	}
	const flood = 200
	replies, err := e.nc.SubscribeSync(events.InboxPrefix("acme") + ".flood.*")
	if err != nil {
		t.Fatal(err)
	}
	for i := range flood {
		_ = e.nc.PublishRequest(events.APISubject(events.VerbMemory, "acme", "s1"), fmt.Sprintf("%s.flood.%d", events.InboxPrefix("acme"), i), nil)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	m, err := chunked.Request(rctx, e.nc, events.APISubject(events.VerbMemory, "globex", "g1"), nil, nil)
	if err != nil {
		t.Fatalf("globex's read behind acme's flood: %v", err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("globex's read: error %s %s", code, m.Header.Get(micro.ErrorHeader))
	}
	refused := 0
	for seen := map[string]bool{}; len(seen) < flood; {
		r, err := replies.NextMsg(20 * time.Second)
		if err != nil {
			t.Fatalf("%d of acme's %d reads answered: %v", len(seen), flood, err)
		}
		if !seen[r.Subject] && r.Header.Get(micro.ErrorCodeHeader) == "429" {
			refused++
		}
		seen[r.Subject] = true
	}
	if refused == 0 {
		t.Fatalf("none of acme's %d reads at once was refused over its share of %d", flood, microapi.ReadsPerTenant)
	}
	t.Logf("acme's %d reads at once: %d refused with 429", flood, refused)
}
