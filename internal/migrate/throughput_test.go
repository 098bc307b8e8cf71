package migrate

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// TestMigrationThroughput measures a migration's time per million records
// (PerMillion): RECALL_MIGRATE_BENCH_RECORDS records of 1 KiB over 2,000
// sessions of three tenants in a file-storage legacy stream, a memory
// record, an index entry and a commit record per session, and the three
// services' durables, migrated to 4 shards on one embedded server (the
// migration and the server share the machine). Measured for PerMillion:
// 200,000 records in 11.2 s (17,900 records/s: the copy 8.0 s, the scan of
// the shards 2.1 s, the translations 0.6 s), 56 s per million, on a 2-core
// machine with a load average of 9 from other work; 9.2 s (46 s per
// million) at a load average of 5. PerMillion rounds up. Skipped unless
// the variable is set:
//
//	RECALL_MIGRATE_BENCH_RECORDS=200000 go test ./internal/migrate/ -run Throughput -v
func TestMigrationThroughput(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("RECALL_MIGRATE_BENCH_RECORDS"))
	if n <= 0 {
		t.Skip("set RECALL_MIGRATE_BENCH_RECORDS to measure")
	}
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	ctx := context.Background()
	pc := provision.Config{Shards: 4}
	if _, err := js.CreateStream(ctx, LegacyStreamConfig(pc)); err != nil {
		t.Fatal(err)
	}
	for _, kc := range provision.Buckets(pc) {
		if _, err := js.CreateKeyValue(ctx, kc); err != nil {
			t.Fatal(err)
		}
	}
	fill(t, js, n, 2000)
	s, _ := js.Stream(ctx, provision.StreamLegacyTranscript)
	for _, d := range []string{events.DurableTrigger, events.DurableIndexer, events.DurableLongTerm} {
		ack := jetstream.AckExplicitPolicy
		if d == events.DurableTrigger {
			ack = jetstream.AckAllPolicy
		}
		if _, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: d, AckPolicy: ack}); err != nil {
			t.Fatal(err)
		}
	}
	nc, _ := nats.Connect(srv.ClientURL())
	defer nc.Close()
	bulk, _ := nats.Connect(srv.ClientURL())
	defer bulk.Close()
	var copied time.Duration
	start := time.Now()
	m, err := New(nc, bulk, Config{Provision: pc, Log: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		hook: func(point string, _ int64) error {
			if point == "durable" && copied == 0 {
				copied = time.Since(start)
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := m.Run(ctx)
	if err != nil || rep.Copied != int64(n) {
		t.Fatalf("%+v %v", rep, err)
	}
	perMillion := time.Duration(float64(rep.Duration) * 1e6 / float64(n))
	t.Logf("%d records (%d sessions, 1 KiB each): %s in all (%.0f records/s), %s up to the durables; %s per million records",
		n, 2000, rep.Duration.Round(time.Millisecond), float64(n)/rep.Duration.Seconds(), copied.Round(time.Millisecond), perMillion.Round(time.Second))
}

// fill publishes n records of 1 KiB over sessions sessions (async,
// bounded), then a memory record, an index entry and a commit record per
// session naming its last record.
func fill(t *testing.T, js jetstream.JetStream, n, sessions int) {
	ctx := context.Background()
	body := []byte(`{"role":"assistant","content":"` + strings.Repeat("x", 1000) + `"}`)
	last := map[int]uint64{}
	var futures []jetstream.PubAckFuture
	var keys []int
	flush := func() {
		<-js.PublishAsyncComplete()
		for i, f := range futures {
			select {
			case a := <-f.Ok():
				last[keys[i]] = a.Sequence
			case err := <-f.Err():
				t.Fatal(err)
			}
		}
		futures, keys = futures[:0], keys[:0]
	}
	for i := range n {
		s := i % sessions
		m := nats.NewMsg(events.LegacyTranscriptSubject([]string{"acme", "globex", "initech"}[s%3], fmt.Sprintf("s%05d", s)))
		m.Data = body
		m.Header.Set("ce-id", fmt.Sprintf("ev-%d", i))
		m.Header.Set("ce-type", events.TypeMessage)
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			t.Fatal(err)
		}
		futures, keys = append(futures, f), append(keys, s)
		if len(futures) == 2000 {
			flush()
		}
	}
	flush()
	mem, _ := js.KeyValue(ctx, events.BucketMemory)
	idx, _ := js.KeyValue(ctx, events.BucketIndex)
	ltm, _ := js.KeyValue(ctx, events.BucketLTMState)
	for s, seq := range last {
		tenant, session := []string{"acme", "globex", "initech"}[s%3], fmt.Sprintf("s%05d", s)
		key := events.MemoryKey(tenant, session)
		for kv, v := range map[jetstream.KeyValue]string{
			mem: fmt.Sprintf(`{"notes":"n","covered_seq":%d,"last_summarized_seq":%d}`, seq, seq),
			idx: fmt.Sprintf(`{"tenant":%q,"session":%q,"last_indexed_seq":%d}`, tenant, session, seq),
		} {
			if _, err := kv.Put(ctx, key, []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := ltm.Put(ctx, events.CommitKey(tenant, session), []byte(fmt.Sprintf(`{"last_seq":%d}`, seq))); err != nil {
			t.Fatal(err)
		}
	}
}
