package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// copied is where a legacy record landed.
type copied struct {
	shard int
	seq   uint64
}

// shardView is what the shards hold after a migration, read independently
// of the migration's code.
type shardView struct {
	at   map[uint64]copied  // legacy seq → where
	back map[copied]copy2   // where → legacy seq (and the session in key)
	seqs map[string][]copy2 // per session, in shard order
	last []uint64
	// foreign counts the records that did not come from the migration.
	foreign int
}

type copy2 struct {
	legacy, seq uint64
	key         string
}

// verify checks everything a completed migration promises.
func (l *legacy) verify(layout events.Layout) *shardView {
	l.t.Helper()
	v := l.readShards(layout)
	l.checkRecords(layout, v)
	l.checkPositions(v)
	l.checkRequests(v)
	l.checkDurables(layout, v)
	l.checkSealed(layout)
	return v
}

// readShards reads every shard with its data and checks each record
// against its legacy original: same payload and CloudEvents headers, in
// the right shard, at most once.
func (l *legacy) readShards(layout events.Layout) *shardView {
	l.t.Helper()
	ctx := context.Background()
	v := &shardView{at: map[uint64]copied{}, back: map[copied]copy2{}, seqs: map[string][]copy2{}, last: make([]uint64, layout.Shards())}
	bySeq := map[uint64]legacyRecord{}
	for _, r := range l.records {
		bySeq[r.seq] = r
	}
	for k := range layout.Shards() {
		s, err := l.js.Stream(ctx, events.TranscriptShardStream(k))
		if err != nil {
			l.t.Fatal(err)
		}
		st := s.CachedInfo().State
		v.last[k] = st.LastSeq
		for seq := st.FirstSeq; seq <= st.LastSeq && st.Msgs > 0; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				l.t.Fatalf("shard %d seq %d: %v", k, seq, err)
			}
			from, err := strconv.ParseUint(m.Header.Get(HeaderMigratedFrom), 10, 64)
			if err != nil {
				v.foreign++
				continue
			}
			r, ok := bySeq[from]
			switch {
			case !ok:
				l.t.Fatalf("shard %d seq %d comes from legacy %d, which does not exist", k, seq, from)
			case v.at[from] != (copied{}):
				l.t.Fatalf("legacy record %d copied twice: %v and shard %d seq %d", from, v.at[from], k, seq)
			case layout.Shard(r.tenant, r.session) != k || m.Subject != events.ShardSubject(k, r.tenant, r.session):
				l.t.Fatalf("legacy record %d of %s in shard %d on %s", from, r.key(), k, m.Subject)
			case string(m.Data) != string(r.data) || m.Header.Get("ce-id") != r.id || m.Header.Get("ce-recalltenant") != r.tenant:
				l.t.Fatalf("legacy record %d changed: %q %v", from, m.Data, m.Header)
			case m.Header.Get(jetstream.MsgIDHeader) != events.DedupID(r.tenant, r.id) && m.Header.Get(HeaderOriginalMsgID) != events.DedupID(r.tenant, r.id):
				l.t.Fatalf("legacy record %d lost its message id: %v", from, m.Header)
			}
			v.at[from] = copied{shard: k, seq: seq}
			v.back[copied{shard: k, seq: seq}] = copy2{legacy: from, seq: seq, key: r.key()}
			v.seqs[r.key()] = append(v.seqs[r.key()], copy2{legacy: from, seq: seq})
		}
	}
	return v
}

// checkRecords checks that every legacy record is in its shard and each
// session's records keep their order.
func (l *legacy) checkRecords(layout events.Layout, v *shardView) {
	l.t.Helper()
	if len(v.at) != len(l.records) || v.foreign != l.foreign {
		l.t.Fatalf("%d records in the shards (and %d others, want %d), %d in the legacy stream", len(v.at), v.foreign, l.foreign, len(l.records))
	}
	for key, legacySeqs := range l.bySession {
		got := v.seqs[key]
		if len(got) != len(legacySeqs) {
			l.t.Fatalf("%s: %d records in its shard, %d in the legacy stream", key, len(got), len(legacySeqs))
		}
		for i, c := range got {
			if c.legacy != legacySeqs[i] || (i > 0 && c.seq <= got[i-1].seq) {
				l.t.Fatalf("%s: record %d is legacy %d at %d, want legacy %d after %v", key, i, c.legacy, c.seq, legacySeqs[i], got[max(i-1, 0)])
			}
		}
	}
}

// upTo and from translate a legacy position of a session independently of
// the migration's code.
func (v *shardView) upTo(key string, legacy uint64) uint64 {
	var got uint64
	for _, c := range v.seqs[key] {
		if c.legacy <= legacy {
			got = c.seq
		}
	}
	return got
}

func (v *shardView) from(layout events.Layout, tenant, session string, legacy uint64) uint64 {
	if legacy == 0 {
		return 0
	}
	for _, c := range v.seqs[events.MemoryKey(tenant, session)] {
		if c.legacy >= legacy {
			return c.seq
		}
	}
	return v.last[layout.Shard(tenant, session)] + 1
}

// get reads and decodes a key's value; ok is false when it is missing.
func (l *legacy) get(bucket, key string, into any) bool {
	l.t.Helper()
	ctx := context.Background()
	kv, err := l.js.KeyValue(ctx, bucket)
	if err != nil {
		l.t.Fatal(err)
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return false
	}
	if err != nil {
		l.t.Fatal(err)
	}
	if err := json.Unmarshal(e.Value(), into); err != nil {
		l.t.Fatal(err)
	}
	return true
}

// checkPositions checks every stored position.
func (l *legacy) checkPositions(v *shardView) {
	l.t.Helper()
	layout := l.pc.Layout()
	for key, want := range l.memory {
		var got events.MemoryRecord
		l.get(events.BucketMemory, key, &got)
		t, s := split(key)
		if got.CoveredSeq != v.upTo(key, want.CoveredSeq) || got.LastSummarizedSeq != v.upTo(key, want.LastSummarizedSeq) ||
			got.ContextSeq != v.from(layout, t, s, want.ContextSeq) || got.Notes != want.Notes || got.Extractions != want.Extractions {
			l.t.Fatalf("memory %s: got %+v from %+v", key, got, want)
		}
	}
	for key, want := range l.index {
		var got events.SessionIndex
		l.get(events.BucketIndex, key, &got)
		t, s := split(key)
		if got.LastIndexedSeq != v.upTo(key, want.LastIndexedSeq) || got.ReadFromSeq != v.from(layout, t, s, want.ReadFromSeq) || got.Name != want.Name {
			l.t.Fatalf("index %s: got %+v from %+v", key, got, want)
		}
	}
	for key, want := range l.commits {
		var got events.CommitRecord
		t, s := split(key)
		l.get(events.BucketLTMState, events.CommitKey(t, s), &got)
		if got.LastSeq != v.upTo(key, want.LastSeq) || got.User != want.User {
			l.t.Fatalf("commit record %s: got %+v from %+v", key, got, want)
		}
	}
	l.checkParked(v)
	var name map[string]string
	if !l.get(events.BucketIndex, "names.acme.some-name", &name) || !l.get(events.BucketParked, "invalid.7", &name) {
		l.t.Fatal("a key without positions was touched")
	}
	if n := l.msgs("KV_" + events.BucketTriggerState); n != 0 {
		l.t.Fatalf("%d trigger snapshots left", n)
	}
}

// checkParked checks that parked items moved to their translated keys.
func (l *legacy) checkParked(v *shardView) {
	l.t.Helper()
	for _, p := range l.parkedUpTo {
		key, up := p[0].(string), p[1].(uint64)
		t, s := split(key)
		var got parked.Parked
		nu := v.upTo(key, up)
		if !l.get(events.BucketParked, parked.Key(t, s, nu), &got) || got.Request.UpToSeq != nu || got.Error != "boom" {
			l.t.Fatalf("parked %s %d: not at %d (%+v)", key, up, nu, got)
		}
		if nu != up && l.get(events.BucketParked, parked.Key(t, s, up), &got) {
			l.t.Fatalf("parked %s %d: the old key is left", key, up)
		}
	}
	for _, p := range l.parkedCommits {
		key, up := p[0].(string), p[1].(uint64)
		t, s := split(key)
		var got parked.Commit
		nu := v.upTo(key, up)
		if !l.get(events.BucketLTMState, events.ParkedCommitKey(t, s, nu), &got) || got.UpTo != nu {
			l.t.Fatalf("parked commit %s %d: not at %d (%+v)", key, up, nu, got)
		}
		if nu != up && l.get(events.BucketLTMState, events.ParkedCommitKey(t, s, up), &got) {
			l.t.Fatalf("parked commit %s %d: the old key is left", key, up)
		}
	}
}

// checkRequests checks that each pending request is queued once,
// translated, and its original gone.
func (l *legacy) checkRequests(v *shardView) {
	l.t.Helper()
	for _, c := range []struct {
		stream, filter string
		want           [][2]any
		field          string
	}{
		{events.StreamExtract, events.SubjectExtractPartitioned + ".>", l.extractUpTo, "up_to_seq"},
		{events.StreamCommits, events.SubjectCommitPartitioned + ".>", l.commitUpTo, "up_to"},
	} {
		var got []uint64
		m := &Migrator{js: l.js}
		err := m.eachMsg(context.Background(), c.stream, c.filter, func(raw *jetstream.RawStreamMsg) {
			if raw.Header.Get(HeaderMigratedFrom) == "" {
				l.t.Fatalf("%s: request %d was not translated", c.stream, raw.Sequence)
			}
			var doc map[string]any
			_ = json.Unmarshal(raw.Data, &doc)
			got = append(got, uint64(doc[c.field].(float64)))
		})
		if err != nil {
			l.t.Fatal(err)
		}
		var want []uint64
		for _, w := range c.want {
			want = append(want, v.upTo(w[0].(string), w[1].(uint64)))
		}
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
		if len(got) != len(want) || (len(got) > 0 && !equal(got, want)) {
			l.t.Fatalf("%s: positions %v, want %v", c.stream, got, want)
		}
	}
}

func equal(a, b []uint64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkDurables checks that each service's durable starts, on every
// shard, at the first record its legacy durables had not acknowledged.
func (l *legacy) checkDurables(layout events.Layout, v *shardView) {
	l.t.Helper()
	ctx := context.Background()
	acked := func(durable, key string, legacy uint64) bool {
		if f, ok := l.floors[durable]; ok {
			return legacy <= f
		}
		t, s := split(key)
		p := events.SessionPartition(t, s, 2)
		return legacy <= l.floors[durable+"-"+strconv.Itoa(p)+"-of-2"]
	}
	for _, durable := range []string{events.DurableTrigger, events.DurableIndexer, events.DurableLongTerm} {
		for k := range layout.Shards() {
			want := v.last[k] + 1
			for seq := uint64(1); seq <= v.last[k]; seq++ {
				if c, ok := v.back[copied{shard: k, seq: seq}]; !ok || !acked(durable, c.key, c.legacy) {
					want = seq
					break
				}
			}
			s, _ := l.js.Stream(ctx, events.TranscriptShardStream(k))
			c, err := s.Consumer(ctx, durable)
			if err != nil {
				l.t.Fatalf("%s on shard %d: %v", durable, k, err)
			}
			cfg := c.CachedInfo().Config
			if cfg.OptStartSeq != want || cfg.DeliverPolicy != jetstream.DeliverByStartSequencePolicy {
				l.t.Fatalf("%s on shard %d starts at %d (%v), want %d", durable, k, cfg.OptStartSeq, cfg.DeliverPolicy, want)
			}
			l.takeOver(s, cfg)
		}
	}
}

// takeOver updates a migrated durable as its service does when it starts
// (pcgroup: the service's configuration, keeping the deliver policy and
// start): the trigger's real configuration, the others' settings.
func (l *legacy) takeOver(s jetstream.Stream, have jetstream.ConsumerConfig) {
	l.t.Helper()
	want := triggersvc.Config{}.ConsumerConfig()
	if have.Durable != events.DurableTrigger {
		want = jetstream.ConsumerConfig{Durable: have.Durable, Description: "service", AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: 2 * time.Minute, MaxAckPending: 4096, MaxDeliver: -1,
			PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{"recall"}, PinnedTTL: 30 * time.Second}
	}
	want.DeliverPolicy, want.OptStartSeq, want.OptStartTime = have.DeliverPolicy, have.OptStartSeq, have.OptStartTime
	if _, err := s.UpdateConsumer(context.Background(), want); err != nil {
		l.t.Fatalf("the service cannot take over %s: %v", have.Durable, err)
	}
}

// checkSealed checks that the legacy stream is sealed with its subjects,
// refuses writes, and that provision accepts the deployment.
func (l *legacy) checkSealed(layout events.Layout) {
	l.t.Helper()
	ctx := context.Background()
	info, err := provision.LegacyTranscript(ctx, l.js)
	if err != nil || info == nil || !info.Config.Sealed || info.Config.Subjects[0] != events.SubjectTranscriptRoot+".*.*" {
		l.t.Fatalf("legacy stream not sealed with its subjects: %+v %v", info, err)
	}
	if _, err := l.js.Publish(ctx, events.LegacyTranscriptSubject("acme", "late"), []byte("{}")); err == nil {
		l.t.Fatal("the sealed legacy stream took a record")
	}
	if err := provision.Ensure(ctx, l.js, l.pc); err != nil {
		l.t.Fatalf("provision after the migration: %v", err)
	}
	if got, err := provision.DiscoverLayout(ctx, l.js); err != nil || got.Shards() != layout.Shards() {
		l.t.Fatalf("layout %v %v", got, err)
	}
	if _, err := l.js.Publish(ctx, layout.Subject("acme", "after"), []byte("{}")); err != nil {
		l.t.Fatalf("the shards refuse records after the migration: %v", err)
	}
}

func (l *legacy) msgs(stream string) uint64 {
	l.t.Helper()
	s, err := l.js.Stream(context.Background(), stream)
	if err != nil {
		l.t.Fatal(err)
	}
	return s.CachedInfo().State.Msgs
}

func split(key string) (string, string) {
	t, s, _ := strings.Cut(key, ".")
	return t, s
}
