package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/pcgroup"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// completion is one extraction outcome seen on RECALL_EVENTS.
type completion struct {
	session string
	covered uint64
	upTo    uint64
	skipped bool
	worker  string // the worker that ran it
	failed  string
	at      time.Time
	took    time.Duration // the handler's, model call included
}

// outcomes collects the extraction outcome events of the bench tenant.
type outcomes struct {
	mu    sync.Mutex
	outs  []completion
	want  int
	done  chan struct{}
	subs  []*nats.Subscription
	after func(completion)
}

// collectOutcomes subscribes to the completion and failure events until
// want of them arrived; after, when not nil, sees each outcome once it is
// recorded (on the subscription's goroutine: it must not block).
func collectOutcomes(e *env, want int, after func(completion)) (*outcomes, error) {
	o := &outcomes{want: want, done: make(chan struct{}), after: after}
	for _, kind := range []string{events.KindExtractionCompleted, events.KindExtractionFailed} {
		sub, err := e.nc.Subscribe(events.EventsSubject(kind, benchTenant, "*"), o.onEvent)
		if err != nil {
			o.close()
			return nil, err
		}
		o.subs = append(o.subs, sub)
	}
	if err := e.nc.Flush(); err != nil {
		o.close()
		return nil, err
	}
	return o, nil
}

func (o *outcomes) onEvent(m *nats.Msg) {
	c, ok := decodeOutcome(m)
	if !ok {
		return
	}
	o.mu.Lock()
	o.outs = append(o.outs, c)
	if len(o.outs) == o.want {
		close(o.done)
	}
	o.mu.Unlock()
	if o.after != nil {
		o.after(c)
	}
}

// decodeOutcome decodes an extraction.completed or extraction.failed
// event.
func decodeOutcome(m *nats.Msg) (completion, bool) {
	ev, err := natsce.FromMsg(m)
	if err != nil {
		return completion{}, false
	}
	c := completion{at: time.Now()}
	switch ev.Type() {
	case events.TypeExtractionCompleted:
		var d events.ExtractionCompleted
		if json.Unmarshal(ev.Data(), &d) != nil {
			return c, false
		}
		c.session, c.covered, c.upTo, c.skipped, c.worker = d.Session, d.CoveredSeq, d.UpToSeq, d.Skipped, d.Worker
		c.took = time.Duration(d.DurationMS) * time.Millisecond
	case events.TypeExtractionFailed:
		var d events.ExtractionFailed
		if json.Unmarshal(ev.Data(), &d) != nil {
			return c, false
		}
		c.session, c.upTo, c.failed = d.Session, d.UpToSeq, d.Error
	default:
		return c, false
	}
	return c, true
}

// wait returns the outcomes once want arrived, or an error after limit or
// once abort is closed.
func (o *outcomes) wait(ctx context.Context, limit time.Duration, abort <-chan struct{}) ([]completion, error) {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-o.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-abort:
		return nil, fmt.Errorf("requesting extractions failed")
	case <-t.C:
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.outs) < o.want {
		return nil, fmt.Errorf("%d of %d extraction outcomes within %s", len(o.outs), o.want, limit)
	}
	return append([]completion(nil), o.outs...), nil
}

func (o *outcomes) close() {
	for _, s := range o.subs {
		_ = s.Unsubscribe()
	}
}

// judgeOutcomes counts the model-calling extractions into step and returns
// when the last one completed and the ordering problems: failed outcomes,
// coverage moving back, a late request that cost a model call, sessions
// not covered to their end.
func judgeOutcomes(step *ExtractionStep, outs []completion, load roundLoad, sessions []string) (last time.Time, problems []string) {
	covered := map[string]uint64{}
	for _, c := range outs {
		if c.failed != "" {
			problems = append(problems, fmt.Sprintf("session %s: extraction up to %d failed: %s", c.session, c.upTo, c.failed))
			continue
		}
		if c.covered < covered[c.session] {
			problems = append(problems, fmt.Sprintf("session %s: coverage went back from %d to %d", c.session, covered[c.session], c.covered))
		}
		covered[c.session] = max(covered[c.session], c.covered)
		if c.skipped {
			continue
		}
		step.Extractions++
		last = c.at
		if _, late, _ := load.roundOf(c.session, c.upTo); late {
			problems = append(problems, fmt.Sprintf("session %s: the late request up to %d ran a model call instead of finding it covered", c.session, c.upTo))
		}
	}
	for _, s := range sessions {
		if want := load.last(s); covered[s] < want {
			problems = append(problems, fmt.Sprintf("session %s: covered %d, want %d", s, covered[s], want))
		}
	}
	sort.Strings(problems)
	step.OrderingProblems = len(problems)
	return last, problems
}

// busiestWorker returns how many of sessions the busiest of n workers owns:
// sessions map to partitions as RECALL_EXTRACT's subject transform maps
// them (FNV-1a of tenant and session tokens, modulo the partition count),
// partitions to workers as the extractors' consumer group does.
func busiestWorker(sessions []string, n, partitions int) int {
	load := map[string]int{}
	busiest := 0
	for _, w := range sessionOwners(sessions, n, partitions) {
		load[w]++
		busiest = max(busiest, load[w])
	}
	return busiest
}

// sessionOwners maps each session to the bench worker (of n) that owns its
// partition: the server's partition() is FNV-1a of tenant and session, the
// assignment pcgroup.Assign over the worker ids.
func sessionOwners(sessions []string, n, partitions int) map[string]string {
	members := make([]string, n)
	for w := range members {
		members[w] = fmt.Sprintf("bench-%d-%d", n, w)
	}
	ownerOf := make([]string, partitions)
	for w, ps := range pcgroup.Assign(members, partitions) {
		for _, p := range ps {
			ownerOf[p] = w
		}
	}
	out := make(map[string]string, len(sessions))
	for _, s := range sessions {
		h := fnv.New32a()
		h.Write([]byte(benchTenant + s))
		out[s] = ownerOf[h.Sum32()%uint32(partitions)]
	}
	return out
}

// countShared counts the extractions a worker ran for a session of another
// worker's partition (work sharing).
func countShared(outs []completion, owners map[string]string) int {
	n := 0
	for _, c := range outs {
		if c.failed == "" && !c.skipped && c.worker != owners[c.session] {
			n++
		}
	}
	return n
}
