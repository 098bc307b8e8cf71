package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// fillChunk is the number of messages generated and published at once while
// pre-filling, so a large fill never holds all its messages in memory.
const fillChunk = 10000

// transcriptMsg encodes the next message of session exactly as ingest stores
// it (binary mode, tenant extension, Nats-Msg-Id), skipping validation: the
// generator's events are valid (the ingest scenario validates the same
// generator's output).
func transcriptMsg(layout events.Layout, g *benchgen.Gen, session string) *nats.Msg {
	ev := g.Event(session)
	ev.SetExtension(events.ExtTenant, benchTenant)
	m := natsce.NewMsg(layout.Subject(benchTenant, session), &ev)
	m.Header[jetstream.MsgIDHeader] = []string{events.DedupID(benchTenant, ev.ID())}
	return m
}

// fillPlan says how many messages each session gets; sessions are
// interleaved round-robin while they have messages left, as concurrent
// sessions arrive.
type fillPlan struct {
	sessions []string
	counts   []int
}

func (p fillPlan) total() int {
	n := 0
	for _, c := range p.counts {
		n += c
	}
	return n
}

// fill publishes the plan's messages to their sessions' transcript shards
// with async publish and returns, per shard, the last sequence it stored
// there (0 where it stored nothing). onStored, when not nil, sees every
// stored message's session and sequence (in the session's shard).
func (e *env) fill(ctx context.Context, g *benchgen.Gen, p fillPlan, onStored func(session string, seq uint64)) (shardSeqs, error) {
	left := append([]int(nil), p.counts...)
	batch := make([]*nats.Msg, 0, fillChunk)
	batchSess := make([]string, 0, fillChunk)
	layout := e.layout()
	last := make(shardSeqs, layout.Shards())
	flush := func() error {
		futs := make([]jetstream.PubAckFuture, len(batch))
		for i, m := range batch {
			f, err := e.js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute))
			if err != nil {
				return fmt.Errorf("pre-filling the transcript: %w", err)
			}
			futs[i] = f
		}
		for i, f := range futs {
			select {
			case ack := <-f.Ok():
				k := layout.Shard(benchTenant, batchSess[i])
				last[k] = max(last[k], ack.Sequence)
				if onStored != nil {
					onStored(batchSess[i], ack.Sequence)
				}
			case err := <-f.Err():
				return fmt.Errorf("pre-filling the transcript: %w", err)
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Minute):
				return fmt.Errorf("pre-filling the transcript: no ack within 1m")
			}
		}
		batch, batchSess = batch[:0], batchSess[:0]
		return nil
	}
	active := make([]int, 0, len(p.sessions))
	for i, c := range left {
		if c > 0 {
			active = append(active, i)
		}
	}
	for len(active) > 0 {
		kept := active[:0]
		for _, i := range active {
			left[i]--
			if left[i] > 0 {
				kept = append(kept, i)
			}
			batch = append(batch, transcriptMsg(layout, g, p.sessions[i]))
			batchSess = append(batchSess, p.sessions[i])
			if len(batch) == fillChunk {
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
		active = kept
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return last, nil
}

// eventOf builds a CloudEvent Recall would publish (source recall-bench,
// tenant extension set, JSON data).
func eventOf(typ, id, session string, data []byte) event.Event {
	ev := event.New()
	ev.SetID(id)
	ev.SetSource("recall-bench")
	ev.SetType(typ)
	ev.SetSubject(session)
	ev.SetTime(time.Now())
	ev.SetExtension(events.ExtTenant, benchTenant)
	_ = ev.SetData(event.ApplicationJSON, data)
	return ev
}
