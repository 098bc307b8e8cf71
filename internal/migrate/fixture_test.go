package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// legacy is a deployment from before shards, built by hand on an embedded
// server: the old transcript stream with records over many tenants and
// sessions, the other streams and buckets as provision creates them,
// stored positions of every kind, pending requests, and the services'
// durables with ack floors.
type legacy struct {
	t   *testing.T
	srv *natstest.Server
	js  jetstream.JetStream
	pc  provision.Config
	// records are the legacy records in order; bySession their sequences
	// per "<tenant>.<session>".
	records   []legacyRecord
	bySession map[string][]uint64
	// floors are the legacy durables' ack floors.
	floors map[string]uint64
	// memory, index and commits are the stored positions written, per key.
	memory  map[string]events.MemoryRecord
	index   map[string]events.SessionIndex
	commits map[string]events.CommitRecord
	// parkedUpTo and parkedCommits are the parked items' (session key, position).
	parkedUpTo, parkedCommits [][2]any
	// extractUpTo and commitUpTo are the pending requests' (session key, position).
	extractUpTo, commitUpTo [][2]any
	// foreign counts the records a test put in the shards itself.
	foreign int
}

type legacyRecord struct {
	seq             uint64
	tenant, session string
	id              string
	data            []byte
}

func (r legacyRecord) key() string { return events.MemoryKey(r.tenant, r.session) }

// fixtureOptions size a legacy deployment.
type fixtureOptions struct {
	records, sessions int
	shards            int
	// partitionedTrigger gives the trigger two partition durables instead
	// of one.
	partitionedTrigger bool
	// memoryStorage keeps the streams in memory.
	memoryStorage bool
	// dedup is the dedup window (default 200 ms, so that most records are
	// older than the last window and some are inside it).
	dedup time.Duration
}

func newLegacy(t *testing.T, o fixtureOptions) *legacy {
	t.Helper()
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	if o.dedup == 0 {
		o.dedup = 200 * time.Millisecond
	}
	l := &legacy{t: t, srv: srv, js: js, pc: provision.Config{Shards: o.shards, MemoryStorage: o.memoryStorage, DedupWindow: o.dedup},
		bySession: map[string][]uint64{}, floors: map[string]uint64{},
		memory: map[string]events.MemoryRecord{}, index: map[string]events.SessionIndex{}, commits: map[string]events.CommitRecord{}}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, LegacyStreamConfig(l.pc)); err != nil {
		t.Fatal(err)
	}
	for _, sc := range provision.Streams(l.pc) {
		if strings.HasPrefix(sc.Name, events.StreamTranscriptShardPrefix) {
			continue
		}
		if _, err := js.CreateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	for _, kc := range provision.Buckets(l.pc) {
		if _, err := js.CreateKeyValue(ctx, kc); err != nil {
			t.Fatal(err)
		}
	}
	l.publish(o.records, o.sessions)
	l.positions()
	l.requests()
	l.durables(o.partitionedTrigger)
	return l
}

// publish stores n records over sessions sessions of three tenants, in a
// random interleaving, as CloudEvents in binary mode.
func (l *legacy) publish(n, sessions int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	tenants := []string{"acme", "globex", "initech"}
	for i := range n {
		s := rng.IntN(sessions)
		r := legacyRecord{tenant: tenants[s%len(tenants)], session: fmt.Sprintf("s%03d", s)}
		r.data = []byte(fmt.Sprintf(`{"role":"user","content":"record %d of %s"}`, i, r.session))
		e := eventtest.NewSession(r.tenant, r.session).Event(fmt.Sprintf("ev-%05d", i), events.TypeMessage, r.data)
		r.id = e.ID()
		m := natsce.NewMsg(events.LegacyTranscriptSubject(r.tenant, r.session), &e)
		m.Header[jetstream.MsgIDHeader] = []string{events.DedupID(r.tenant, r.id)}
		ack, err := l.js.PublishMsg(ctx, m)
		if err != nil {
			l.t.Fatal(err)
		}
		r.seq = ack.Sequence
		l.records = append(l.records, r)
		l.bySession[r.key()] = append(l.bySession[r.key()], r.seq)
	}
}

// put writes v as JSON under key of bucket.
func (l *legacy) put(bucket, key string, v any) {
	l.t.Helper()
	ctx := context.Background()
	kv, err := l.js.KeyValue(ctx, bucket)
	if err != nil {
		l.t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		l.t.Fatal(err)
	}
	if _, err := kv.Put(ctx, key, b); err != nil {
		l.t.Fatal(err)
	}
}

// positions stores positions of every kind for most sessions: each names
// one of the session's records, and some name another session's record
// (an "up to" between the session's records).
func (l *legacy) positions() {
	i := 0
	for key, seqs := range l.bySession {
		tenant, session, _ := strings.Cut(key, ".")
		i++
		if len(seqs) < 6 || i%7 == 0 {
			continue
		}
		rec := events.MemoryRecord{Notes: "notes of " + key, LastSummarizedSeq: seqs[2], CoveredSeq: seqs[4], ContextSeq: seqs[1], Extractions: 2}
		if i%5 == 0 {
			rec.CoveredSeq = seqs[4] + 1 // not the session's record: between two of them
			rec.ContextSeq = 0
		}
		l.memory[key] = rec
		l.put(events.BucketMemory, key, rec)
		idx := events.SessionIndex{Tenant: tenant, Session: session, Name: "name-" + session, LastIndexedSeq: seqs[3], ReadFromSeq: seqs[2]}
		l.index[key] = idx
		l.put(events.BucketIndex, key, idx)
		cr := events.CommitRecord{Tenant: tenant, Session: session, User: "u1", LastSeq: seqs[5], Commits: 1}
		l.commits[key] = cr
		l.put(events.BucketLTMState, events.CommitKey(tenant, session), cr)
		if i%4 == 0 {
			up := seqs[len(seqs)-1]
			l.put(events.BucketParked, parked.Key(tenant, session, up),
				parked.Parked{Request: events.ExtractionRequested{Tenant: tenant, Session: session, UpToSeq: up}, Reason: "test", Error: "boom"})
			l.parkedUpTo = append(l.parkedUpTo, [2]any{key, up})
			up2 := seqs[len(seqs)-2]
			l.put(events.BucketLTMState, events.ParkedCommitKey(tenant, session, up2),
				parked.Commit{Tenant: tenant, User: "u1", Session: session, UpTo: up2, Error: "boom"})
			l.parkedCommits = append(l.parkedCommits, [2]any{key, up2})
			l.put(events.BucketTriggerState, key, map[string]uint64{"seq": up})
		}
	}
	l.put(events.BucketIndex, "names.acme.some-name", map[string]string{"session": "s000"})
	l.put(events.BucketParked, "invalid.7", map[string]string{"raw": "x"})
}

// requests queues extraction and commit requests for a few sessions.
func (l *legacy) requests() {
	ctx := context.Background()
	n := 0
	for key, seqs := range l.bySession {
		if n++; n > 6 {
			return
		}
		tenant, session, _ := strings.Cut(key, ".")
		up := seqs[len(seqs)-1]
		r := events.ExtractionRequested{Tenant: tenant, Session: session, UpToSeq: up, UpToID: "x", Reason: events.ReasonThreshold}
		m := nats.NewMsg(events.ExtractSubject(tenant, session))
		m.Data, _ = json.Marshal(r)
		m.Header.Set(jetstream.MsgIDHeader, r.RequestDedupID())
		m.Header["ce-id"] = []string{r.RequestDedupID()}
		if _, err := l.js.PublishMsg(ctx, m); err != nil {
			l.t.Fatal(err)
		}
		l.extractUpTo = append(l.extractUpTo, [2]any{key, up})
		c := nats.NewMsg(events.CommitSubject(tenant, "u1"))
		c.Data, _ = json.Marshal(events.CommitQueued{Session: session, Reason: events.CommitReasonSessionEnded, UpTo: seqs[0]})
		c.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s:%s:%d", tenant, session, seqs[0]))
		if _, err := l.js.PublishMsg(ctx, c); err != nil {
			l.t.Fatal(err)
		}
		l.commitUpTo = append(l.commitUpTo, [2]any{key, seqs[0]})
	}
}

// durables creates the services' legacy durables and acknowledges up to
// their floors: the trigger (AckAll) at 60 % of the records (or two
// partition durables at 30 % and 70 %), the indexer (explicit acks) at
// 45 %, with deliveries above the floor left unacknowledged, and the
// long-term memory service at 0.
func (l *legacy) durables(partitioned bool) {
	n := uint64(len(l.records))
	if partitioned {
		l.durable(events.DurableTrigger+"-0-of-2", jetstream.AckAllPolicy, n*3/10)
		l.durable(events.DurableTrigger+"-1-of-2", jetstream.AckAllPolicy, n*7/10)
	} else {
		l.durable(events.DurableTrigger, jetstream.AckAllPolicy, n*6/10)
	}
	l.durable(events.DurableIndexer, jetstream.AckExplicitPolicy, n*45/100)
	l.durable(events.DurableLongTerm, jetstream.AckExplicitPolicy, 0)
}

func (l *legacy) durable(name string, ack jetstream.AckPolicy, floor uint64) {
	l.t.Helper()
	ctx := context.Background()
	s, err := l.js.Stream(ctx, provision.StreamLegacyTranscript)
	if err != nil {
		l.t.Fatal(err)
	}
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: name, Description: "legacy " + name, AckPolicy: ack,
		AckWait: time.Minute, MaxAckPending: 4096, MaxDeliver: -1,
		PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{priorityGroup}, PinnedTTL: time.Minute})
	if err != nil {
		l.t.Fatal(err)
	}
	l.floors[name] = floor
	for got := uint64(0); got < floor+10 && got < uint64(len(l.records)); {
		batch, err := c.Fetch(int(min(500, floor+10-got)), jetstream.FetchPriorityGroup(priorityGroup), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			l.t.Fatal(err)
		}
		for m := range batch.Messages() {
			got++
			md, _ := m.Metadata()
			if md.Sequence.Stream <= floor && (ack == jetstream.AckExplicitPolicy || md.Sequence.Stream == floor) {
				if err := m.DoubleAck(ctx); err != nil {
					l.t.Fatal(err)
				}
			}
		}
		if batch.Error() != nil {
			l.t.Fatal(batch.Error())
		}
	}
	if err := s.UnpinConsumer(ctx, name, priorityGroup); err != nil && floor > 0 {
		l.t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil || info.AckFloor.Stream != floor {
		l.t.Fatalf("durable %s: ack floor %d, want %d (%v)", name, info.AckFloor.Stream, floor, err)
	}
}
