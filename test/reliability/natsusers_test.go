package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// TestPipelineWithGeneratedNATSUsers runs every service as the NATS user
// `recall nats-permissions --service` generates for it, and a platform as
// its tenant user: events published by the tenant are extracted and
// compacted end to end, so the reference permissions are sufficient; and the
// tenant user still cannot reach the other tenant.
func TestPipelineWithGeneratedNATSUsers(t *testing.T) {
	h, viol := startWithGeneratedUsers(t)
	h.Provider = llm.NewOffline()
	h.TweakTrigger = func(c *triggersvc.Config) { c.MinTokensToInit, c.MinTokensBetweenUpdate = 500, 500 }
	h.startTrigger()
	h.startExtractor()
	h.startCompactor()
	h.startIngest()

	tenantNC := tenantConn(t, h, tenantA)
	var evs []event.Event
	for i := 0; i < 24; i++ {
		evs = append(evs, transcriptEvent(tenantA, "perm", i, 400))
	}
	// One request over the inline limit: ingest stores its body in the
	// claim-check object store and every reader fetches it, as its user.
	evs = append(evs, transcriptEvent(tenantA, "perm", 24, 600<<10))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Tenants publish through the ingest endpoint (no transcript permission).
	if r := ingestNATS(t, tenantNC, tenantA, "perm", evs); r.Accepted != len(evs) {
		t.Fatalf("tenant publishing: %+v", r)
	}
	// Its own notifications arrive; the trigger's thresholds fire an
	// extraction that the extractor completes.
	sub, err := tenantNC.SubscribeSync(events.EventsSubject(events.KindExtractionCompleted, tenantA, "*"))
	if err != nil {
		t.Fatal(err)
	}
	memKV, _ := h.js.KeyValue(ctx, events.BucketMemory)
	testpoll.Until(t, 30*time.Second, "an extraction of the tenant's session", func() bool {
		_, err := memKV.Get(ctx, events.MemoryKey(tenantA, "perm"))
		return err == nil
	})

	if _, err := sub.NextMsg(10 * time.Second); err != nil {
		// The completion may have been announced before the subscription;
		// a manual extraction announces another.
		if _, err := manualExtract(h, tenantA, "perm", 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := sub.NextMsg(10 * time.Second); err != nil {
			t.Fatalf("tenant did not receive its completion event: %v", err)
		}
	}
	// The notes cover the whole session, the large request too.
	if res, err := manualExtract(h, tenantA, "perm", 30*time.Second); err != nil || !res.Success {
		t.Fatalf("manual extraction: %+v %v", res, err)
	}
	// The tenant compacts its session over NATS (chunked reply to its
	// private inbox) and reads its memory through the extractor's API.
	// (A platform compacts when its context is full and says how full.)
	for _, verb := range []string{events.VerbCompact, events.VerbMemory} {
		body := []byte(`{}`)
		if verb == events.VerbCompact {
			body = []byte(`{"context_tokens":150000}`)
		}
		m, err := chunked.Request(ctx, tenantNC, events.APISubject(verb, tenantA, "perm"), nil, body)
		if err != nil {
			t.Fatalf("tenant %s: %v", verb, err)
		}
		if m.Header.Get("Nats-Service-Error-Code") != "" || !json.Valid(m.Data) {
			t.Fatalf("tenant %s: %s %s", verb, m.Header.Get("Nats-Service-Error"), m.Data)
		}
		if verb == events.VerbCompact {
			var r events.CompactReply
			_ = json.Unmarshal(m.Data, &r)
			if !r.Served {
				t.Fatalf("compaction not served: %s %s", r.Outcome, r.Reason)
			}
		}
	}
	// And it still cannot touch tenant B.
	rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer rcancel()
	if _, err := chunked.Request(rctx, tenantNC, events.APISubject(events.VerbCompact, tenantB, "perm"), nil, nil); err == nil {
		t.Fatal("tenant A compacted tenant B's session")
	}
	if err := tenantNC.LastError(); err == nil || !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
		t.Fatalf("last error %v, want a permissions violation", err)
	}
	// No service hit a permission violation on the way: the server logs
	// every violation with the user; only the tenant's attempt on B is
	// expected.
	for _, line := range viol.lines() {
		if !strings.Contains(line, "tenant-"+tenantA) {
			t.Errorf("a service was denied something it needs: %s", line)
		}
	}
	t.Logf("server-side violations: %d (the tenant's attempt on B)", len(viol.lines()))
}

// violationLog is a nats-server logger that keeps permission violations.
type violationLog struct {
	mu sync.Mutex
	l  []string
}

func (v *violationLog) keep(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if strings.Contains(strings.ToLower(s), "violation") {
		v.mu.Lock()
		v.l = append(v.l, s)
		v.mu.Unlock()
	}
}
func (v *violationLog) lines() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.l...)
}
func (v *violationLog) Noticef(f string, a ...any) { v.keep(f, a...) }
func (v *violationLog) Warnf(f string, a ...any)   { v.keep(f, a...) }
func (v *violationLog) Fatalf(f string, a ...any)  { v.keep(f, a...) }
func (v *violationLog) Errorf(f string, a ...any)  { v.keep(f, a...) }
func (v *violationLog) Debugf(f string, a ...any)  { v.keep(f, a...) }
func (v *violationLog) Tracef(f string, a ...any)  { v.keep(f, a...) }
