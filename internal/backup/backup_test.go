package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/events"
)

var prov = provision.Config{Partitions: 4, Shards: 2}

// seeded is a provisioned server with records in the transcript, memory
// with history, a claim-checked object and a tombstone.
func seeded(t *testing.T) (*natstest.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := srv.Connect(t)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, prov); err != nil {
		t.Fatal(err)
	}
	layout := prov.Layout()
	for i := range 50 {
		session := fmt.Sprintf("s%d", i%5)
		if _, err := js.Publish(ctx, layout.Subject("acme", session), []byte(fmt.Sprintf("record %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	mem, _ := js.KeyValue(ctx, events.BucketMemory)
	for rev := range 3 {
		if _, err := mem.Put(ctx, events.MemoryKey("acme", "s1"), []byte(fmt.Sprintf("memory rev %d", rev))); err != nil {
			t.Fatal(err)
		}
	}
	obj, _ := js.ObjectStore(ctx, events.BucketBlobs)
	if _, err := obj.PutBytes(ctx, "acme/s1/big", bytes.Repeat([]byte("x"), 300<<10)); err != nil {
		t.Fatal(err)
	}
	tomb, _ := json.Marshal(events.Tombstone{Tenant: "acme", Session: "gone", ErasedAt: time.Now(), Until: time.Now().Add(time.Hour)})
	if _, err := store.PutTTL(ctx, js, events.BucketTombstones, events.TombstoneKey("acme", "gone"), tomb, time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	return srv, nc, js
}

// contents is every message of every Recall stream: stream → seq →
// subject and data.
func contents(t *testing.T, js jetstream.JetStream) map[string]map[uint64]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]map[uint64]string{}
	for name := range js.StreamNames(ctx).Name() {
		if !IsRecallStream(name) {
			continue
		}
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = map[uint64]string{}
		st := s.CachedInfo().State
		for seq := st.FirstSeq; seq > 0 && seq <= st.LastSeq; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			out[name][seq] = m.Subject + " " + string(m.Data)
		}
	}
	return out
}

// TestBackupRestoreRoundTrip: every stream comes back with every message
// at its sequence, the manifest records the layout, and the backup's
// tombstone is erased again (its session's records, restored from the
// transcript, are gone).
func TestBackupRestoreRoundTrip(t *testing.T) {
	_, nc, js := seeded(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "b")
	m, err := Backup(ctx, nc, dir, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Shards != 2 || m.Partitions != 4 || len(m.Streams) != len(provision.Names(prov)) || len(m.Tombstones) != 1 {
		t.Fatalf("manifest: shards %d partitions %d streams %d (want %d) tombstones %v", m.Shards, m.Partitions, len(m.Streams), len(provision.Names(prov)), m.Tombstones)
	}
	if last := m.Streams[len(m.Streams)-1].Name; last != "KV_"+events.BucketTombstones {
		t.Fatalf("the last stream copied is %s, want the tombstones", last)
	}
	before := contents(t, js)

	nc2, js2 := natstest.Start(t).Connect(t)
	rep, err := Restore(ctx, nc2, dir, RestoreOptions{Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Streams != len(m.Streams) || len(rep.Erased) != 1 {
		t.Fatalf("report: %+v", rep)
	}
	after := contents(t, js2)
	for name, msgs := range before {
		for seq, want := range msgs {
			if got := after[name][seq]; got != want && name != "KV_"+events.BucketTombstones && name != events.StreamEvents {
				t.Errorf("%s #%d: %.60q, want %.60q", name, seq, got, want)
			}
		}
	}
	if len(after) != len(before) {
		t.Errorf("%d streams restored, %d backed up", len(after), len(before))
	}
}

// TestRestoreErasesAgain: a session erased after the backup (its
// tombstone only on the target, or only in a newer backup) and one erased
// during it (its records in the backup's transcript, its tombstone in the
// backup's manifest) are erased after the restore.
func TestRestoreErasesAgain(t *testing.T) {
	_, nc, js := seeded(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "b")
	if _, err := Backup(ctx, nc, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	layout := prov.Layout()
	// The target erased s2 after the backup was taken.
	tomb, _ := json.Marshal(events.Tombstone{Tenant: "acme", Session: "s2", ErasedAt: time.Now(), Until: time.Now().Add(time.Hour)})
	if _, err := store.PutTTL(ctx, js, events.BucketTombstones, events.TombstoneKey("acme", "s2"), tomb, time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(t.TempDir(), "newer")
	m3 := Manifest{Format: Format, Tombstones: []events.Tombstone{{Tenant: "acme", Session: "s3", Until: time.Now().Add(-time.Hour)}}}
	if err := os.MkdirAll(newer, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeManifest(newer, m3); err != nil {
		t.Fatal(err)
	}
	extra, err := ErasedFrom(newer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(ctx, nc, dir, RestoreOptions{}); !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("restore onto a server with data: %v", err)
	}
	rep, err := Restore(ctx, nc, dir, RestoreOptions{Force: true, ErasedFrom: extra})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Deleted) == 0 || len(rep.Erased) != 3 {
		t.Fatalf("deleted %v, erased %d", rep.Deleted, len(rep.Erased))
	}
	for _, session := range []string{"s2", "s3"} {
		s, _ := js.Stream(ctx, layout.Stream("acme", session))
		if _, err := s.GetLastMsgForSubject(ctx, layout.Subject("acme", session)); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Errorf("%s's records are back after the restore: %v", session, err)
		}
	}
	kv, _ := js.KeyValue(ctx, events.BucketTombstones)
	if _, err := kv.Get(ctx, events.TombstoneKey("acme", "s2")); err != nil {
		t.Errorf("s2's tombstone is not live after the restore: %v", err)
	}
	if _, err := kv.Get(ctx, events.TombstoneKey("acme", "s3")); err == nil {
		t.Errorf("s3's expired tombstone was written again")
	}
	s, _ := js.Stream(ctx, layout.Stream("acme", "s1"))
	if _, err := s.GetLastMsgForSubject(ctx, layout.Subject("acme", "s1")); err != nil {
		t.Errorf("s1, never erased, lost its records: %v", err)
	}
}
