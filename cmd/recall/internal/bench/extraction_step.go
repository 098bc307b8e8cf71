package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/pkg/retry"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
)

// extractorFetchWait bounds the workers' pull requests: a worker that lost
// a partition stops receiving its messages within it.
const extractorFetchWait = time.Second

// extractionStep runs one worker count: pre-fill, start the workers, wait
// until every partition has a worker pulling, request every session's
// rounds (each when the previous one settled) and wait for every outcome.
func extractionStep(ctx context.Context, e *env, p extractionPlan, provider llm.Provider, workers int) (ExtractionStep, []string, error) {
	step := ExtractionStep{Workers: workers}
	sessions := benchgen.SessionIDs(fmt.Sprintf("x%d_", workers), p.sessions)
	seqs, err := fillExtractionSessions(ctx, e, sessions, p.rounds*extractMessages)
	if err != nil {
		return step, nil, err
	}
	load := roundLoad{seqs: seqs, rounds: p.rounds}
	stop, err := startExtractorsN(ctx, e, provider, workers, p.perWorker)
	defer stop()
	if err != nil {
		return step, nil, err
	}
	outs, start, used, err := requestRounds(ctx, e, p, load, sessions, workers)
	if err != nil {
		return step, nil, err
	}
	last, problems := judgeOutcomes(&step, outs, load, sessions)
	used.record(&step)
	summarizeStep(&step, e, p, sessions, outs, last.Sub(start))
	e.progress("   %d workers: %d extractions (%d outcomes) in %s", workers, step.Extractions, len(outs), last.Sub(start).Round(time.Millisecond))
	return step, problems, nil
}

// requestRounds requests the first round of every session, each next
// round when the session's previous request settled, and returns every
// outcome, when the first request went out and the process CPU used from
// then to the last outcome.
func requestRounds(ctx context.Context, e *env, p extractionPlan, load roundLoad, sessions []string, workers int) ([]completion, time.Time, cpuUse, error) {
	q := startRequester(ctx, e.js, load, len(sessions))
	defer q.stop()
	col, err := collectOutcomes(e, 2*len(sessions)*p.rounds, func(c completion) {
		if r, late, ok := load.roundOf(c.session, c.upTo); ok && !late && r+1 < load.rounds {
			q.next(c.session, r+1)
		}
	})
	if err != nil {
		return nil, time.Time{}, cpuUse{}, err
	}
	defer col.close()
	waves := 4*len(sessions)*p.rounds/workers/p.perWorker + 4*p.rounds
	limit := 30*time.Second + time.Duration(waves)*p.latency
	meter := startStepMeter()
	for _, s := range sessions {
		q.next(s, 0)
	}
	outs, err := col.wait(ctx, limit, q.failed)
	used := meter.end()
	if qerr := q.stop(); qerr != nil {
		err = qerr // why the wait was cut short
	}
	return outs, meter.start, used, err
}

// summarizeStep fills in step's rates, balance and sharing from its
// outcomes, which took took from the first request to the last extraction.
func summarizeStep(step *ExtractionStep, e *env, p extractionPlan, sessions []string, outs []completion, took time.Duration) {
	parts := e.provisionConfig().Partitions
	step.BusiestWorkerSessions = busiestWorker(sessions, step.Workers, parts)
	step.Shared = countShared(outs, sessionOwners(sessions, step.Workers, parts))
	per := p.perWorker
	waves := func(n int) float64 { return float64((n*p.rounds + per - 1) / per) }
	step.EfficiencyBound = round3(waves(len(sessions)) / float64(step.Workers) / waves(step.BusiestWorkerSessions))
	var besides latencies
	for _, c := range outs {
		if c.failed == "" && !c.skipped {
			besides = append(besides, c.took-p.latency)
		}
	}
	if len(besides) > 0 {
		step.OverheadP50MS = round3(besides.percentile(50) / 1000)
		step.OverheadP99MS = round3(besides.percentile(99) / 1000)
	}
	step.ExtractionsPerS = round3(rate(step.Extractions, took))
	step.CapacityPerS = round3(float64(step.Workers*per) / p.latency.Seconds())
	step.Utilization = round3(step.ExtractionsPerS / step.CapacityPerS)
}

// fillExtractionSessions stores n records for each session and returns
// each session's stream sequences, in order.
func fillExtractionSessions(ctx context.Context, e *env, sessions []string, n int) (map[string][]uint64, error) {
	plan := fillPlan{sessions: sessions, counts: make([]int, len(sessions))}
	for i := range plan.counts {
		plan.counts[i] = n
	}
	seqs := map[string][]uint64{}
	var mu sync.Mutex
	_, err := e.fill(ctx, benchgen.New(11), plan, func(s string, seq uint64) {
		mu.Lock()
		seqs[s] = append(seqs[s], seq)
		mu.Unlock()
	})
	return seqs, err
}

// roundLoad is each session's requests, round after round: round r's
// request reaches the session's record (r+1)·extractMessages and costs one
// model call; right behind it comes a request one record short (a request
// delayed in flight), which must be answered as already covered, never run
// beside the first nor move the coverage back. (Identical requests would
// be deduplicated by the stream.)
type roundLoad struct {
	seqs   map[string][]uint64 // each session's stream sequences, in order
	rounds int
}

// requests are session's two requests of round, in publishing order.
func (l roundLoad) requests(session string, round int) []events.ExtractionRequested {
	end := (round+1)*extractMessages - 1
	out := make([]events.ExtractionRequested, 0, 2)
	for _, i := range []int{end, end - 1} {
		out = append(out, events.ExtractionRequested{Tenant: benchTenant, Session: session, UpToSeq: l.seqs[session][i],
			UpToID: fmt.Sprintf("%s-m%06d", session, i), Reason: events.ReasonThreshold})
	}
	return out
}

// roundOf says which round's request of session reaches upTo and whether
// it is the late one; ok is false for a sequence no request names.
func (l roundLoad) roundOf(session string, upTo uint64) (round int, late, ok bool) {
	i := indexOf(l.seqs[session], upTo)
	switch {
	case i < 0:
		return 0, false, false
	case (i+1)%extractMessages == 0:
		return (i+1)/extractMessages - 1, false, true
	case (i+2)%extractMessages == 0:
		return (i+2)/extractMessages - 1, true, true
	}
	return 0, false, false
}

// last is the sequence of session's last record (its last round's end).
func (l roundLoad) last(session string) uint64 {
	return l.seqs[session][l.rounds*extractMessages-1]
}

func indexOf(l []uint64, v uint64) int {
	for i, x := range l {
		if x == v {
			return i
		}
	}
	return -1
}

// requester publishes the rounds of a roundLoad as they are asked for, in
// the order asked, asynchronously: one goroutine publishes, another awaits
// the acks. A session's two requests of a round are published back to
// back, so the stream stores them in that order. failed is closed at the
// first error (err).
type requester struct {
	js     jetstream.JetStream
	load   roundLoad
	todo   chan sessionRound
	acks   chan jetstream.PubAckFuture
	failed chan struct{}
	done   chan struct{} // the ack goroutine returned
	once   sync.Once

	mu     sync.Mutex
	queued map[string]int // rounds queued per session
	closed bool
	err    error
}

type sessionRound struct {
	session string
	round   int
}

func startRequester(ctx context.Context, js jetstream.JetStream, load roundLoad, sessions int) *requester {
	n := sessions * load.rounds
	q := &requester{js: js, load: load, todo: make(chan sessionRound, n), acks: make(chan jetstream.PubAckFuture, 2*n),
		failed: make(chan struct{}), done: make(chan struct{}), queued: map[string]int{}}
	go q.publish()
	go q.awaitAcks(ctx)
	return q
}

// next queues session's round unless it was queued already (an outcome
// announced twice). It never blocks: the queue holds every round.
func (q *requester) next(session string, round int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.queued[session] > round {
		return
	}
	q.queued[session] = round + 1
	q.todo <- sessionRound{session, round}
}

func (q *requester) publish() {
	defer close(q.acks)
	for sr := range q.todo {
		for _, req := range q.load.requests(sr.session, sr.round) {
			f, err := q.js.PublishMsgAsync(requestMsg(req), jetstream.WithStallWait(time.Minute))
			if err != nil {
				q.fail(fmt.Errorf("publishing an extraction request: %w", err))
				continue
			}
			q.acks <- f
		}
	}
}

func (q *requester) awaitAcks(ctx context.Context) {
	defer close(q.done)
	for f := range q.acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			q.fail(fmt.Errorf("publishing an extraction request: %w", err))
		case <-ctx.Done():
			q.fail(ctx.Err())
		}
	}
}

func (q *requester) fail(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err == nil {
		q.err = err
		close(q.failed)
	}
}

// stop ends the publishing after the queued rounds, waits for their acks
// and returns the first publishing error. It may be called more than once.
func (q *requester) stop() error {
	q.once.Do(func() {
		q.mu.Lock()
		q.closed = true
		close(q.todo)
		q.mu.Unlock()
		<-q.done
	})
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// requestMsg is an extraction request as the trigger publishes it: a
// binary-mode CloudEvent on recall.extract.<tenant>.<session>, deduplicated
// by RequestDedupID.
func requestMsg(req events.ExtractionRequested) *nats.Msg {
	data, _ := json.Marshal(req)
	ev := eventOf(events.TypeExtractionRequested, req.RequestDedupID(), req.Session, data)
	m := natsce.NewMsg(events.ExtractSubject(req.Tenant, req.Session), &ev)
	m.Header[jetstream.MsgIDHeader] = []string{req.RequestDedupID()}
	return m
}

// publishRequest publishes an extraction request (requestMsg) and waits
// for the stream to store it.
func publishRequest(ctx context.Context, js jetstream.JetStream, req events.ExtractionRequested) error {
	if _, err := js.PublishMsg(ctx, requestMsg(req)); err != nil {
		return fmt.Errorf("publishing an extraction request: %w", err)
	}
	return nil
}

// startExtractors starts workers extractor services with sizesFor's
// concurrency (see startExtractorsN).
func startExtractors(ctx context.Context, e *env, provider llm.Provider, workers int) (stop func(), err error) {
	return startExtractorsN(ctx, e, provider, workers, e.sizes.extractPerWorker)
}

// startExtractorsN starts workers extractor services running perWorker
// extractions at once each, and waits until every partition has a worker
// pulling. stop (always set) stops them all at once.
func startExtractorsN(ctx context.Context, e *env, provider llm.Provider, workers, perWorker int) (stop func(), err error) {
	var svcs []*service
	stop = func() {
		t0 := time.Now()
		for _, s := range svcs {
			s.cancel() // stop them all at once, then wait
		}
		for _, s := range svcs {
			_ = s.stop()
		}
		e.progress("   %d workers stopped in %s", workers, time.Since(t0).Round(time.Millisecond))
	}
	for w := 0; w < workers; w++ {
		cfg := extractorsvc.Config{NATS: natsconn.Config{URL: e.url}, Config: e.provisionConfig(), Provider: provider,
			WorkerID: fmt.Sprintf("bench-%d-%d", workers, w), Concurrency: perWorker, FetchWait: extractorFetchWait}
		svc, err := startService(ctx, "extractor", func(ctx context.Context) error {
			return extractorsvc.Run(ctx, cfg, e.log.With("service", "extractor", "worker", cfg.WorkerID))
		}, nil)
		if err != nil {
			return stop, err
		}
		svcs = append(svcs, svc)
	}
	t0 := time.Now()
	if err := waitWorkers(ctx, e, workers, svcs); err != nil {
		return stop, err
	}
	e.progress("   %d workers own every partition after %s", workers, time.Since(t0).Round(time.Millisecond))
	return stop, nil
}

// workersSettle is how long the workers must look ready before a step
// starts: the members that started first took partitions they hand over
// once they see the others, and a hand-over lasts up to a FetchWait (the
// old owner's last pull) plus the requests it still holds. A step that
// started meanwhile would measure those hand-overs. They no longer break
// a session's order: the violation once seen here was pcgroup handing back
// two requests of a session at once, which the server redelivered in
// either order (fixed in pcgroup; TestGroupHandOverKeepsKeyOrder).
const workersSettle = extractorFetchWait + 500*time.Millisecond

// waitWorkers waits until the membership bucket lists n workers and every
// partition consumer has a pull request waiting (an owner is pulling),
// without a break for workersSettle.
func waitWorkers(ctx context.Context, e *env, n int, svcs []*service) error {
	kv, err := e.js.KeyValue(ctx, events.BucketWorkers)
	if err != nil {
		return err
	}
	parts := e.provisionConfig().Partitions
	deadline := time.Now().Add(60 * time.Second)
	var since time.Time // ready without a break since
	for time.Now().Before(deadline) {
		for _, s := range svcs {
			select {
			case <-s.done:
				if s.err != nil && strings.Contains(s.err.Error(), "not implemented") {
					return skipped("the extractor service does not run: " + s.err.Error())
				}
				return fmt.Errorf("an extractor stopped: %v", s.err)
			default:
			}
		}
		keys, _ := kv.Keys(ctx)
		ready := len(keys) == n
		for p := 0; ready && p < parts; p++ {
			c, err := e.js.Consumer(ctx, events.StreamExtract, events.ExtractDurable(p))
			ready = err == nil && c.CachedInfo().NumWaiting > 0
		}
		switch {
		case !ready:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) > workersSettle:
			return nil
		}
		if !retry.Pause(ctx.Done(), 50*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("%d extractors did not own every partition within 60s", n)
}
