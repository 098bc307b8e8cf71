package compactorsvc

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
)

// TestTenantShareOfCompactions: a tenant with its share of compactions in
// flight gets 429 with Retry-After for the next one; another tenant is
// still served.
func TestTenantShareOfCompactions(t *testing.T) {
	e := startEnv(t, envOptions{config: func(c *Config) { c.TenantConcurrency, c.Concurrency = 1, 4 }})
	uuids, seqs := e.publish("s1", conversation(4, 500)...)
	e.putMemory("s1", events.MemoryRecord{Notes: notes("notes"), LastSummarizedID: uuids[7], LastSummarizedSeq: seqs[7]})
	e.putStatus("s1", time.Now())
	done := make(chan *events.CompactReply, 1)
	go func() { done <- e.compact("s1", map[string]int{"wait_timeout_ms": 20000}) }()
	e.waitForWatcher() // the first compaction waits for the running extraction

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := chunked.Request(ctx, e.nc, events.APISubject(events.VerbCompact, tenant, "s2"), nil, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "429" || m.Header.Get("Retry-After") == "" {
		t.Fatalf("the tenant's second compaction: code %q, Retry-After %q, want 429 with Retry-After", code, m.Header.Get("Retry-After"))
	}
	m, err = chunked.Request(ctx, e.nc, events.APISubject(events.VerbCompact, "other", "s9"), nil, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var r events.CompactReply
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" || json.Unmarshal(m.Data, &r) != nil || r.Outcome == "" {
		t.Fatalf("another tenant was refused: %q %s", code, m.Header.Get("Nats-Service-Error"))
	}
	_ = e.status.Delete(context.Background(), events.MemoryKey(tenant, "s1"))
	if r := <-done; !r.Served {
		t.Fatalf("the waiting compaction: %s", r.Outcome)
	}
	if r := e.compact("s2", nil); r.Outcome == "" {
		t.Fatal("the tenant's slot was not freed")
	}
}
