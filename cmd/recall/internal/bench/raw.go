package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

const (
	// rawStream is a copy of a transcript shard stream's configuration on
	// its own subjects, so raw publishes pay what transcript publishes pay
	// (file storage, dedup window, direct get).
	rawStream  = "BENCH_RAW"
	rawSubject = "bench.raw"
	rawBucket  = "BENCH_KV"
	// asyncWindow bounds unacknowledged async publishes, for raw and
	// Recall publishes alike.
	asyncWindow = 4096
	// benchTenant is the tenant every generated event belongs to: the
	// ingest service's open-mode tenant, so HTTP needs no tokens.
	benchTenant = ingestsvc.DefaultTenant
	// rrReplyBytes is the reply size of the request-reply baseline.
	rrReplyBytes = 1024
	// kvValueBytes is the KV value size of the KV get baseline: a memory
	// record with a few KB of notes.
	kvValueBytes = 4096
)

// corpus is the generated ingest workload: events as a platform submits
// them and the NATS messages the ingest path turns them into.
type corpus struct {
	events []event.Event
	msgs   []*nats.Msg
	sizes  Stats
}

var (
	corpusMu    sync.Mutex
	corpusCache = map[[2]int]*corpus{}
)

// releaseCorpora drops the cached corpora and collects them.
func releaseCorpora() {
	corpusMu.Lock()
	clear(corpusCache)
	corpusMu.Unlock()
	runtime.GC()
}

// ingestCorpus returns n events over the given number of sessions, encoded
// as pkg/client would (validated, binary mode, Nats-Msg-Id). It is generated
// once per size and shared by the raw and ingest scenarios.
func (e *env) ingestCorpus(n, sessions int) (*corpus, error) {
	corpusMu.Lock()
	defer corpusMu.Unlock()
	if c := corpusCache[[2]int{n, sessions}]; c != nil {
		e.res.Meta.EventBytes = c.sizes
		return c, nil
	}
	g := benchgen.New(1)
	evs := g.Interleaved(benchgen.SessionIDs("s", sessions), n)
	cl, err := client.New(e.js, benchTenant)
	if err != nil {
		return nil, err
	}
	c := &corpus{events: evs, msgs: make([]*nats.Msg, len(evs))}
	st := Stats{Min: 1 << 30}
	var sum int
	for i := range evs {
		m, err := cl.Msg(context.Background(), evs[i])
		if err != nil {
			return nil, fmt.Errorf("generated event %d is invalid: %w", i, err)
		}
		c.msgs[i] = m
		sz := msgSize(m)
		sum += sz
		st.Min, st.Max = min(st.Min, sz), max(st.Max, sz)
	}
	st.Mean = round1(float64(sum) / float64(len(evs)))
	c.sizes = st
	e.res.Meta.EventBytes = st
	corpusCache[[2]int{n, sessions}] = c
	return c, nil
}

// msgSize is a message's header and body bytes on the wire (approximately:
// header lines as "Name: value\r\n").
func msgSize(m *nats.Msg) int {
	n := len(m.Data) + len("NATS/1.0\r\n\r\n")
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}

func runRaw(ctx context.Context, e *env) error {
	r := &e.res.Raw
	c, err := e.ingestCorpus(e.sizes.ingestEvents, e.sizes.ingestSessions)
	if err != nil {
		return err
	}
	r.Messages = len(c.msgs)

	// Raw async publish of the very messages ingest would publish, on a
	// stream configured like a transcript shard.
	sc := provision.TranscriptStreams(e.provisionConfig())[0]
	sc.Name, sc.Subjects, sc.Description = rawStream, []string{rawSubject + ".>"}, "recall bench raw baseline"
	sc.Metadata = nil // not a shard
	if _, err := e.js.CreateStream(ctx, sc); err != nil {
		return fmt.Errorf("creating %s: %w", rawStream, err)
	}
	msgs := make([]*nats.Msg, len(c.msgs))
	for i, m := range c.msgs {
		msgs[i] = &nats.Msg{Subject: rawSubject + strings.TrimPrefix(m.Subject, events.SubjectTranscriptRoot), Header: m.Header, Data: m.Data}
	}
	d, err := asyncPublish(ctx, e.js, msgs)
	if err != nil {
		return err
	}
	r.JSPublishMsgsPerS = f64(round1(rate(len(msgs), d)))
	e.progress("   raw js publish: %.0f msgs/s (%d msgs, mean %.0f bytes)", *r.JSPublishMsgsPerS, len(msgs), e.res.Meta.EventBytes.Mean)

	d, err = consumeAll(ctx, e.js, rawStream, uint64(len(msgs)))
	if err != nil {
		return err
	}
	r.JSConsumeMsgsPerS = f64(round1(rate(len(msgs), d)))
	e.progress("   raw js consume: %.0f msgs/s", *r.JSConsumeMsgsPerS)

	lat, err := requestReply(ctx, e, e.sizes.latencySamples)
	if err != nil {
		return err
	}
	r.RequestReplyP50US, r.RequestReplyP99US = f64(round1(lat.percentile(50))), f64(round1(lat.percentile(99)))
	e.progress("   raw request-reply: p50 %.0f us, p99 %.0f us", *r.RequestReplyP50US, *r.RequestReplyP99US)

	lat, err = kvGets(ctx, e, e.sizes.latencySamples)
	if err != nil {
		return err
	}
	r.KVGetP50US, r.KVGetP99US = f64(round1(lat.percentile(50))), f64(round1(lat.percentile(99)))
	e.progress("   raw kv get: p50 %.0f us, p99 %.0f us", *r.KVGetP50US, *r.KVGetP99US)
	return nil
}

// asyncPublish publishes msgs with JetStream async publish (at most
// asyncWindow in flight) and waits for every ack. It returns the elapsed
// time from the first publish to the last ack.
func asyncPublish(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) (time.Duration, error) {
	start := time.Now()
	for _, m := range msgs {
		if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
			return 0, fmt.Errorf("publishing: %w", err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(2 * time.Minute):
		return 0, errors.New("publishing: acks did not arrive within 2m")
	}
	d := time.Since(start)
	return d, nil
}

// consumeAll reads n messages of stream with a fresh pull consumer (no acks,
// up to 2000 messages buffered per pull, like the trigger) and returns the elapsed time from the start of
// consuming to the n-th message. The consumer is deleted afterwards.
func consumeAll(ctx context.Context, js jetstream.JetStream, stream string, n uint64) (time.Duration, error) {
	cons, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Name:          "bench-consume",
		AckPolicy:     jetstream.AckNonePolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return 0, fmt.Errorf("creating a consumer on %s: %w", stream, err)
	}
	defer js.DeleteConsumer(context.Background(), stream, "bench-consume")
	done := make(chan struct{})
	var got uint64
	start := time.Now()
	cc, err := cons.Consume(func(m jetstream.Msg) {
		got++
		if got == n {
			close(done)
		}
	}, jetstream.PullMaxMessages(2000))
	if err != nil {
		return 0, fmt.Errorf("consuming %s: %w", stream, err)
	}
	defer cc.Stop()
	select {
	case <-done:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(2 * time.Minute):
		return 0, fmt.Errorf("consuming %s: %d of %d messages within 2m", stream, got, n)
	}
	return time.Since(start), nil
}

// requestReply measures sequential core NATS request-reply round trips with
// a 1 KiB reply, between two connections (the responder's is separate, as a
// service's would be).
func requestReply(ctx context.Context, e *env, samples int) (latencies, error) {
	rnc, err := nats.Connect(e.url, nats.Name("recall-bench-responder"))
	if err != nil {
		return nil, fmt.Errorf("connecting the responder: %w", err)
	}
	defer rnc.Close()
	reply := make([]byte, rrReplyBytes)
	sub, err := rnc.Subscribe("bench.rr", func(m *nats.Msg) { _ = m.Respond(reply) })
	if err != nil {
		return nil, fmt.Errorf("subscribing the responder: %w", err)
	}
	defer sub.Unsubscribe()
	if err := rnc.Flush(); err != nil {
		return nil, err
	}
	req := []byte(`{"tenant":"bench","session":"s000001"}`)
	lat := make(latencies, 0, samples)
	for i := 0; i < samples+samples/10; i++ {
		t0 := time.Now()
		if _, err := e.nc.RequestWithContext(ctx, "bench.rr", req); err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		if i >= samples/10 { // the first tenth warms up
			lat = append(lat, time.Since(t0))
		}
	}
	return lat, nil
}

// kvGets measures sequential KV gets of random keys among 1000 keys holding
// kvValueBytes each, on a file-storage bucket configured like RECALL_MEMORY.
func kvGets(ctx context.Context, e *env, samples int) (latencies, error) {
	kc := provision.Buckets(e.provisionConfig())[0]
	kc.Bucket, kc.Description = rawBucket, "recall bench KV baseline"
	kv, err := e.js.CreateKeyValue(ctx, kc)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", rawBucket, err)
	}
	const keys = 1000
	val := []byte(strings.Repeat("x", kvValueBytes))
	for i := 0; i < keys; i++ {
		if _, err := kv.Put(ctx, fmt.Sprintf("bench.s%06d", i), val); err != nil {
			return nil, fmt.Errorf("filling %s: %w", rawBucket, err)
		}
	}
	r := rand.New(rand.NewPCG(2, 2))
	lat := make(latencies, 0, samples)
	for i := 0; i < samples+samples/10; i++ {
		key := fmt.Sprintf("bench.s%06d", r.IntN(keys))
		t0 := time.Now()
		if _, err := kv.Get(ctx, key); err != nil {
			return nil, fmt.Errorf("getting %s: %w", key, err)
		}
		if i >= samples/10 {
			lat = append(lat, time.Since(t0))
		}
	}
	return lat, nil
}
