package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/indexer/indexersvc"
)

// QueryResult measures questions to a past session (the indexer's query
// endpoint): Recall's own overhead — resolution, memory and transcript
// reads, serialization under the budget, citations — against a floor: the
// raw batch Direct Get (no decoding) of the records Recall read, its last
// Records records.
type QueryResult struct {
	Skipped            string   `json:"skipped,omitempty"`
	TranscriptMessages int      `json:"transcript_messages"`
	Requests           int      `json:"requests"`
	OverheadP50MS      *float64 `json:"overhead_p50_ms"`
	OverheadP99MS      *float64 `json:"overhead_p99_ms"`
	RoundTripP50MS     *float64 `json:"round_trip_p50_ms"`
	RoundTripP99MS     *float64 `json:"round_trip_p99_ms"`
	RecordsRead        int      `json:"records_read"`
	FloorP50MS         *float64 `json:"floor_p50_ms"`
	RatioP50VsFloor    *float64 `json:"ratio_p50_vs_floor"`
}

// queryBudget is the token budget of the measured questions (the default).
const queryBudget = 30000

func runQuery(ctx context.Context, e *env) error {
	r := &e.res.Query
	n := e.sizes.querySessionMessages
	const session = "q1"
	r.TranscriptMessages = n
	last, err := fillQuerySession(ctx, e, session, n)
	if err != nil {
		return err
	}
	// The offline provider answers extractively (its time is the "model"
	// time, outside the overhead); a huge threshold keeps indexing out of
	// the measurement.
	cfg := indexersvc.Config{NATS: natsconn.Config{URL: e.url}, Config: e.provisionConfig(), Provider: llm.NewOffline(), MinNewUserMessages: 1 << 30}
	svc, err := startService(ctx, "indexer", func(ctx context.Context) error {
		return indexersvc.Run(ctx, cfg, e.log.With("service", "indexer"))
	}, func(ctx context.Context) error {
		_, _, err := askQuery(ctx, e, session)
		return err
	})
	if err != nil {
		return err
	}
	defer svc.stop()

	var overhead, round, floor latencies
	for i := 0; i < e.sizes.queryRequests; i++ {
		reply, took, err := askQuery(ctx, e, session)
		if err != nil {
			return err
		}
		overhead = append(overhead, time.Duration(reply.OverheadMS*float64(time.Millisecond)))
		round = append(round, took)
		r.RecordsRead = reply.Records
		fd, err := queryFloor(ctx, e, session, last, reply.Records)
		if err != nil {
			return err
		}
		floor = append(floor, fd)
	}
	r.Requests = len(overhead)
	ms := func(l latencies, p float64) *float64 { return f64(l.percentile(p) / 1000) }
	r.OverheadP50MS, r.OverheadP99MS = ms(overhead, 50), ms(overhead, 99)
	r.RoundTripP50MS, r.RoundTripP99MS = ms(round, 50), ms(round, 99)
	r.FloorP50MS = ms(floor, 50)
	if *r.FloorP50MS > 0 {
		r.RatioP50VsFloor = f64(*r.OverheadP50MS / *r.FloorP50MS)
	}
	e.progress("   %d questions to a %d-record session (%d records read): overhead p50 %.1f ms, p99 %.1f ms; round trip p99 %.1f ms; floor (raw read of those records) p50 %.1f ms",
		r.Requests, n, r.RecordsRead, *r.OverheadP50MS, *r.OverheadP99MS, *r.RoundTripP99MS, *r.FloorP50MS)
	return nil
}

// fillQuerySession stores n records of session and its memory notes, and
// returns the last record's sequence.
func fillQuerySession(ctx context.Context, e *env, session string, n int) (uint64, error) {
	g := benchgen.New(11)
	lasts, err := e.fill(ctx, g, fillPlan{sessions: []string{session}, counts: []int{n}}, nil)
	if err != nil {
		return 0, err
	}
	last := lasts[e.layout().Shard(benchTenant, session)]
	kv, err := e.js.KeyValue(ctx, events.BucketMemory)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", events.BucketMemory, err)
	}
	b, _ := json.Marshal(events.MemoryRecord{Notes: benchNotes(g, session), UpdatedAt: time.Now()})
	if _, err := kv.Put(ctx, events.MemoryKey(benchTenant, session), b); err != nil {
		return 0, err
	}
	return last, nil
}

// askQuery asks session the bench's question and returns the reply and the
// round trip.
func askQuery(ctx context.Context, e *env, session string) (*events.QueryReply, time.Duration, error) {
	body, _ := json.Marshal(events.QueryRequest{Question: "Which files and errors came up, and what was decided?", BudgetTokens: queryBudget})
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	t0 := time.Now()
	m, err := chunked.Request(rctx, e.nc, events.APISubject(events.VerbQuery, benchTenant, session), nil, body)
	took := time.Since(t0)
	if err != nil {
		return nil, 0, err
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		return nil, 0, fmt.Errorf("query answered %s: %s", code, m.Header.Get("Nats-Service-Error"))
	}
	var reply events.QueryReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		return nil, 0, err
	}
	return &reply, took, nil
}

// queryFloor times a raw batch Direct Get of the records a question read:
// the bench session is alone in its shard's stream, so its last records are the
// last sequences.
func queryFloor(ctx context.Context, e *env, session string, last uint64, records int) (time.Duration, error) {
	from := uint64(1)
	if last > uint64(records) {
		from = last - uint64(records) + 1
	}
	t0 := time.Now()
	err := transcript.ScanRaw(ctx, e.nc, e.layout().Stream(benchTenant, session), e.layout().Subject(benchTenant, session), from, last, transcript.DefaultBatch, func(transcript.Raw) bool { return true })
	if err != nil {
		return 0, fmt.Errorf("floor read: %w", err)
	}
	return time.Since(t0), nil
}
