package migrate

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// next is the first legacy record not in its shard yet, and that shard.
func (l *legacy) next() (legacyRecord, int) {
	l.t.Helper()
	layout := l.pc.Layout()
	m := &Migrator{js: l.js, layout: layout}
	var lastFrom []uint64
	for k := range layout.Shards() {
		c, err := m.cursor(context.Background(), k)
		if err != nil {
			l.t.Fatal(err)
		}
		lastFrom = append(lastFrom, c.migrated)
	}
	for _, r := range l.records {
		if k := layout.Shard(r.tenant, r.session); r.seq > lastFrom[k] {
			return r, k
		}
	}
	l.t.Fatal("every record is copied")
	return legacyRecord{}, 0
}

// inject stores a message in shard k as a writer would while the shard
// takes only the migration's input subject.
func (l *legacy) inject(k int, r legacyRecord, h nats.Header) {
	l.t.Helper()
	m := nats.NewMsg(inputSubjects(k)[:len(inputSubjects(k))-3] + r.tenant + "." + r.session)
	m.Data, m.Header = r.data, h
	if _, err := l.js.PublishMsg(context.Background(), m); err != nil {
		l.t.Fatal(err)
	}
}

func (l *legacy) legacyHeaders(seq uint64) nats.Header {
	l.t.Helper()
	s, err := l.js.Stream(context.Background(), provision.StreamLegacyTranscript)
	if err != nil {
		l.t.Fatal(err)
	}
	raw, err := s.GetMsg(context.Background(), seq)
	if err != nil {
		l.t.Fatal(err)
	}
	h := nats.Header{}
	for name, v := range raw.Header { // without Direct Get's own headers
		if !strings.HasPrefix(name, "Nats-") || name == jetstream.MsgIDHeader {
			h[name] = v
		}
	}
	return h
}

// A publish of an earlier attempt that lands after the next attempt read
// the shards (a late in-flight message) makes the attempt's publish to
// that shard fail on its expected sequence; the copy resumes and stores
// every record once.
func TestMigrateLateCopyIsNotDuplicated(t *testing.T) {
	l := newLegacy(t, fixtureOptions{records: 2000, sessions: 60, shards: 3})
	if _, err := l.migrate(killAt("copy", 900)); !errors.Is(err, errKilled) {
		t.Fatal(err)
	}
	injected := false
	rep, err := l.migrate(func(point string, _ int64) error {
		if point == "resumed" && !injected {
			injected = true
			r, k := l.next()
			h := l.legacyHeaders(r.seq)
			h.Set(HeaderMigratedFrom, strconv.FormatUint(r.seq, 10))
			l.inject(k, r, h)
		}
		return nil
	})
	if err != nil || rep.Copied+rep.Present != 2000 {
		t.Fatalf("%+v %v", rep, err)
	}
	l.verify(l.pc.Layout())
}

// A copy the shard takes for a duplicate (its Nats-Msg-Id is already
// there) is stored again without the id, which it keeps in
// HeaderOriginalMsgID; a record of another writer is left where it is.
func TestMigrateDuplicateIDIsCopiedWithoutIt(t *testing.T) {
	l := newLegacy(t, fixtureOptions{records: 1500, sessions: 40, shards: 2, dedup: 5 * time.Minute})
	if _, err := l.migrate(killAt("copy", 700)); !errors.Is(err, errKilled) {
		t.Fatal(err)
	}
	var victim legacyRecord
	rep, err := l.migrate(func(point string, _ int64) error {
		if point == "resumed" && victim.seq == 0 {
			r, k := l.next()
			victim = r
			h := nats.Header{}
			h.Set(jetstream.MsgIDHeader, events.DedupID(r.tenant, r.id))
			l.inject(k, legacyRecord{tenant: r.tenant, session: r.session, data: []byte(`{"foreign":true}`)}, h)
			l.foreign++
		}
		return nil
	})
	if err != nil || rep.Foreign != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	v := l.verify(l.pc.Layout())
	s, _ := l.js.Stream(context.Background(), events.TranscriptShardStream(v.at[victim.seq].shard))
	raw, err := s.GetMsg(context.Background(), v.at[victim.seq].seq)
	if err != nil || raw.Header.Get(HeaderOriginalMsgID) != events.DedupID(victim.tenant, victim.id) || raw.Header.Get(jetstream.MsgIDHeader) != "" {
		t.Fatalf("the duplicate's copy: %v %v", raw.Header, err)
	}
}

// Writers of either version get an error while the migration runs.
func TestMigrateRefusesWritersMeanwhile(t *testing.T) {
	l := newLegacy(t, fixtureOptions{records: 500, sessions: 20, shards: 2})
	ctx := context.Background()
	checked := false
	_, err := l.migrate(func(point string, n int64) error {
		if point == "copy" && n == 10 {
			checked = true
			if _, err := l.js.Publish(ctx, events.LegacyTranscriptSubject("acme", "late"), []byte("{}")); err == nil {
				t.Error("the frozen legacy stream took a record")
			}
			if _, err := l.js.Publish(ctx, l.pc.Layout().Subject("acme", "early"), []byte("{}")); err == nil {
				t.Error("a shard took a record of a writer during the copy")
			}
		}
		return nil
	})
	if err != nil || !checked {
		t.Fatal(err)
	}
	l.verify(l.pc.Layout())
}

// A trigger partitioned before shards (recall-trigger-<p>-of-<n>) gets
// one durable per shard, starting at the first record of the shard one of
// its partitions had not acknowledged.
func TestMigratePartitionedTrigger(t *testing.T) {
	l := newLegacy(t, fixtureOptions{records: 2000, sessions: 50, shards: 3, partitionedTrigger: true})
	if _, err := l.migrate(nil); err != nil {
		t.Fatal(err)
	}
	l.verify(l.pc.Layout())
}

// Signs of running services (here a pinned consumer) stop the migration
// before it changes anything, unless forced.
func TestMigrateRefusesWhileServicesRun(t *testing.T) {
	l := newLegacy(t, fixtureOptions{records: 300, sessions: 10, shards: 2})
	ctx := context.Background()
	s, _ := l.js.Stream(ctx, provision.StreamLegacyTranscript)
	c, _ := s.Consumer(ctx, events.DurableIndexer)
	if _, err := c.Fetch(1, jetstream.FetchPriorityGroup(priorityGroup), jetstream.FetchMaxWait(time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := l.migrate(nil)
	if !errors.Is(err, ErrServicesRunning) {
		t.Fatalf("migration while a consumer is pinned: %v", err)
	}
	if info, _ := provision.LegacyTranscript(ctx, l.js); info.Config.Metadata[metaState] != "" {
		t.Fatal("the refused migration changed the legacy stream")
	}
	nc, _ := nats.Connect(l.srv.ClientURL())
	defer nc.Close()
	m, _ := New(nc, nc, Config{Provision: l.pc, Force: true})
	if _, err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	l.verify(l.pc.Layout())
}

// A dry run counts the records per shard as the migration moves them and
// changes nothing; a migration to another shard count than one under way
// is refused.
func TestPlanAndShardCount(t *testing.T) {
	l := newLegacy(t, fixtureOptions{records: 1000, sessions: 30, shards: 4})
	ctx := context.Background()
	nc, _ := nats.Connect(l.srv.ClientURL())
	defer nc.Close()
	m, _ := New(nc, nc, Config{Provision: l.pc})
	p, err := m.Plan(ctx)
	if err != nil || p.State != "not started" || p.Records != 1000 || p.Sessions != len(l.bySession) || len(p.Durables) != 3 || p.Pending[events.StreamExtract] != 6 {
		t.Fatalf("plan %+v %v", p, err)
	}
	if _, err := l.migrate(killAt("copy", 100)); !errors.Is(err, errKilled) {
		t.Fatal(err)
	}
	other := l.pc
	other.Shards = 8
	m8, _ := New(nc, nc, Config{Provision: other, IdleWait: time.Millisecond})
	if _, err := m8.Run(ctx); !errors.Is(err, ErrShardCount) {
		t.Fatalf("another shard count: %v", err)
	}
	rep, err := l.migrate(nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, sp := range p.PerShard {
		if sp.Records != rep.PerShard[k] {
			t.Fatalf("shard %d: planned %d, migrated %d", k, sp.Records, rep.PerShard[k])
		}
	}
	l.verify(l.pc.Layout())
}

// Without a legacy stream there is nothing to do.
func TestMigrateWithoutLegacy(t *testing.T) {
	l := newLegacy(t, fixtureOptions{records: 10, sessions: 2, shards: 2})
	ctx := context.Background()
	if err := l.js.DeleteStream(ctx, provision.StreamLegacyTranscript); err != nil {
		t.Fatal(err)
	}
	rep, err := l.migrate(nil)
	if err != nil || rep.Outcome != OutcomeNoLegacy {
		t.Fatalf("%+v %v", rep, err)
	}
}
