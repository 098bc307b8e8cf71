package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// LongSessionStep is one extraction of the long session: how much of the
// transcript it could have read, where it started reading, and Recall's
// time in it (the completion's duration less the fake model's latency).
type LongSessionStep struct {
	Records    int     `json:"records"`
	ReadFrom   uint64  `json:"read_from_seq"` // 0: the first record
	Parts      int     `json:"parts"`         // model calls (a backlog goes in parts)
	OverheadMS float64 `json:"overhead_ms"`   // besides the model's latency of each part
}

// runLongSession extracts one long session three times with one worker, 100
// records apart near its end, as a session that keeps growing would be: the
// first finds nothing summarized, a backlog far over the token cap, and
// summarizes it in parts; the second and the third read from the window
// the last part kept.
func runLongSession(ctx context.Context, e *env, provider llm.Provider) ([]LongSessionStep, error) {
	if err := e.reset(ctx); err != nil {
		return nil, err
	}
	session, n := "long-1", e.sizes.longSessionRecords
	var seqs []uint64
	plan := fillPlan{sessions: []string{session}, counts: []int{n}}
	if _, err := e.fill(ctx, benchgen.New(17), plan, func(_ string, seq uint64) { seqs = append(seqs, seq) }); err != nil {
		return nil, err
	}
	done := make(chan events.ExtractionCompleted, 3)
	sub, err := e.nc.Subscribe(events.EventsSubject(events.KindExtractionCompleted, benchTenant, session), func(m *nats.Msg) {
		var d events.ExtractionCompleted
		if ev, err := natsce.FromMsg(m); err == nil && json.Unmarshal(ev.Data(), &d) == nil && !d.Skipped {
			done <- d
		}
	})
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	stop, err := startExtractors(ctx, e, provider, 1)
	defer stop()
	if err != nil {
		return nil, err
	}
	kv, err := e.js.KeyValue(ctx, events.BucketMemory)
	if err != nil {
		return nil, err
	}
	memories := store.NewMemory(kv)
	var steps []LongSessionStep
	for _, upTo := range []int{n - 200, n - 100, n} {
		mem, _, err := memories.Get(ctx, benchTenant, session)
		if err != nil {
			return nil, err
		}
		req := events.ExtractionRequested{Tenant: benchTenant, Session: session, UpToSeq: seqs[upTo-1],
			UpToID: fmt.Sprintf("%s-m%06d", session, upTo-1), Reason: events.ReasonThreshold}
		if err := publishRequest(ctx, e.js, req); err != nil {
			return nil, err
		}
		select {
		case d := <-done:
			after, _, err := memories.Get(ctx, benchTenant, session)
			if err != nil {
				return nil, err
			}
			parts := after.Extractions - mem.Extractions
			steps = append(steps, LongSessionStep{Records: upTo, ReadFrom: mem.ContextSeq, Parts: parts,
				OverheadMS: round3(float64(d.DurationMS) - float64(parts)*float64(e.sizes.extractLatency/time.Millisecond))})
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Minute):
			return nil, fmt.Errorf("no extraction of the long session up to record %d within 5m", upTo)
		}
	}
	return steps, nil
}
