package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

// lagWatch records every completed extraction as it is announced; a phase
// then measures each one's lag behind the record it covers.
type lagWatch struct {
	sub  *nats.Subscription
	mu   sync.Mutex
	seen []soakCompletion
}

type soakCompletion struct {
	tenant, session string
	upTo            uint64
	at              time.Time
}

func watchLags(nc *nats.Conn) (*lagWatch, error) {
	w := &lagWatch{}
	sub, err := nc.Subscribe(events.EventsSubject(events.KindExtractionCompleted, "*", "*"), func(m *nats.Msg) {
		var c events.ExtractionCompleted
		if json.Unmarshal(m.Data, &c) != nil || c.Skipped || c.UpToSeq == 0 {
			return
		}
		w.mu.Lock()
		w.seen = append(w.seen, soakCompletion{c.Tenant, c.Session, c.UpToSeq, time.Now()})
		w.mu.Unlock()
	})
	if err != nil {
		return nil, fmt.Errorf("watching extraction outcomes: %w", err)
	}
	w.sub = sub
	return w, nil
}

// take returns and resets the completions seen so far.
func (w *lagWatch) take() []soakCompletion {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// extractionLags is, for each soakCompletion, the time from the record it
// covers up to being stored to the memory covering it being announced.
func extractionLags(ctx context.Context, js jetstream.JetStream, layout events.Layout, cs []soakCompletion) (latencies, error) {
	shards := make([]jetstream.Stream, layout.Shards())
	for k, name := range layout.Streams() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("reading stream %s: %w", name, err)
		}
		shards[k] = s
	}
	out := make(latencies, 0, len(cs))
	for _, c := range cs {
		m, err := shards[layout.Shard(c.tenant, c.session)].GetMsg(ctx, c.upTo)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading record %d of %s: %w", c.upTo, c.session, err)
		}
		out = append(out, c.at.Sub(m.Time))
	}
	return out, nil
}

// streamSizes lists every stream's messages and bytes; for a KV bucket's
// stream also its keys, so messages ÷ keys is the history kept per key.
func streamSizes(ctx context.Context, js jetstream.JetStream) ([]StreamSize, error) {
	var out []StreamSize
	l := js.ListStreams(ctx)
	for info := range l.Info() {
		s := StreamSize{Name: info.Config.Name, Msgs: info.State.Msgs, Bytes: info.State.Bytes}
		if strings.HasPrefix(s.Name, "KV_") {
			s.Keys = uint64(info.State.NumSubjects)
		}
		out = append(out, s)
	}
	if err := l.Err(); err != nil {
		return out, fmt.Errorf("listing streams: %w", err)
	}
	return out, nil
}

// consumerPending sums, per durable on the transcript shards, the records
// not yet delivered or not yet acknowledged; ephemeral consumers (ordered
// readers, and those a SIGKILLed process left until their inactivity
// threshold) are summed under "ephemeral", with their number under
// "ephemeral_consumers".
func consumerPending(ctx context.Context, js jetstream.JetStream, layout events.Layout) map[string]uint64 {
	out := map[string]uint64{}
	for _, name := range layout.Streams() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			continue
		}
		l := s.ListConsumers(ctx)
		for ci := range l.Info() {
			key := ci.Name
			if ci.Config.Durable == "" {
				key = "ephemeral"
				out["ephemeral_consumers"]++
			}
			out[key] += ci.NumPending + uint64(ci.NumAckPending)
		}
	}
	return out
}

// backlog is what the pipeline has still to do: the durable consumers'
// pending records and the extraction requests not yet taken.
func backlog(ctx context.Context, js jetstream.JetStream, layout events.Layout) (uint64, error) {
	var n uint64
	for k, v := range consumerPending(ctx, js, layout) {
		if !strings.HasPrefix(k, "ephemeral") {
			n += v
		}
	}
	s, err := js.Stream(ctx, events.StreamExtract)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", events.StreamExtract, err)
	}
	return n + s.CachedInfo().State.Msgs, nil
}

// drain waits until the backlog is empty (or within ends) and returns how
// long that took.
func drain(ctx context.Context, js jetstream.JetStream, layout events.Layout, within time.Duration) (time.Duration, error) {
	t0 := time.Now()
	for {
		n, err := backlog(ctx, js, layout)
		if err == nil && n == 0 {
			return time.Since(t0), nil
		}
		if time.Since(t0) > within {
			return 0, fmt.Errorf("the pipeline did not catch up within %s (backlog %d, %v)", within, n, err)
		}
		if !retry.Pause(ctx.Done(), 250*time.Millisecond) {
			return 0, ctx.Err()
		}
	}
}

// storedIDs counts each event id stored in the transcript shards (the
// Nats-Msg-Id without its tenant prefix), per session.
func storedIDs(ctx context.Context, js jetstream.JetStream, layout events.Layout) (map[string]int, error) {
	counts := map[string]int{}
	for _, name := range layout.Streams() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("reading stream %s: %w", name, err)
		}
		last := s.CachedInfo().State.LastSeq
		if last == 0 {
			continue
		}
		c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return nil, fmt.Errorf("reading stream %s: %w", name, err)
		}
		if err := countIDs(ctx, c, last, counts); err != nil {
			return nil, fmt.Errorf("reading stream %s: %w", name, err)
		}
	}
	return counts, nil
}

func countIDs(ctx context.Context, c jetstream.Consumer, last uint64, counts map[string]int) error {
	for {
		batch, err := c.Fetch(512, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			id := m.Headers().Get(nats.MsgIdHdr)
			if _, after, ok := strings.Cut(id, ":"); ok {
				id = after
			}
			counts[id]++
			if md, err := m.Metadata(); err == nil && md.Sequence.Stream >= last {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no records after waiting 5s, before sequence %d", last)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// verdict compares what the edge acknowledged with what is stored: an
// acknowledged id stored 0 times is lost, one stored more than once is
// duplicated; ids stored although the client gave up on them are counted
// apart (stored late, not lost).
func verdict(expected map[string][]string, stored map[string]int) (lost, duplicated, checked int, examples []string) {
	want := map[string]bool{}
	for _, ids := range expected {
		for _, id := range ids {
			want[id] = true
			checked++
			switch n := stored[id]; {
			case n == 0:
				lost++
				if len(examples) < 5 {
					examples = append(examples, "lost "+id)
				}
			case n > 1:
				duplicated++
				if len(examples) < 5 {
					examples = append(examples, fmt.Sprintf("%s stored %d times", id, n))
				}
			}
		}
	}
	for id, n := range stored {
		if !want[id] && n > 1 {
			duplicated++
		}
	}
	return lost, duplicated, checked, examples
}
