package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// TestRestoreRefusesBadBackups: a corrupt, a truncated and a missing
// stream file, a manifest whose shard count does not match its streams,
// a backup of another shard count than the target's and a directory
// without a manifest are each refused with an error that names the
// problem, and the target is left without any stream.
func TestRestoreRefusesBadBackups(t *testing.T) {
	_, nc, _ := seeded(t)
	ctx := context.Background()
	good := filepath.Join(t.TempDir(), "b")
	m, err := Backup(ctx, nc, good, Options{})
	if err != nil {
		t.Fatal(err)
	}
	shard := m.Streams[0].File
	for _, s := range m.Streams {
		if s.Name == events.TranscriptShardStream(1) {
			shard = s.File
		}
	}
	cases := []struct {
		name   string
		spoil  func(dir string)
		shards int
		want   string
	}{
		{"corrupt", func(dir string) { flip(t, filepath.Join(dir, shard)) }, 0, "does not match its checksum (corrupt)"},
		{"truncated", func(dir string) { cut(t, filepath.Join(dir, shard)) }, 0, "the manifest says"},
		{"missing", func(dir string) { _ = os.Remove(filepath.Join(dir, shard)) }, 0, shard + " (stream RECALL_TRANSCRIPT_1) is missing"},
		{"manifest of another shard count", func(dir string) { editManifest(t, dir, func(m *Manifest) { m.Shards = 4 }) }, 0, "does not belong to a transcript of 4 shards"},
		{"manifest without a shard", func(dir string) {
			editManifest(t, dir, func(m *Manifest) { m.Streams = dropStream(m.Streams, events.TranscriptShardStream(1)) })
		}, 0, "records 2 transcript shards but lists 1"},
		{"target of another shard count", func(string) {}, 4, "has 2 shards, the target is configured with 4"},
		{"no manifest", func(dir string) { _ = os.Remove(filepath.Join(dir, ManifestFile)) }, 0, "has no manifest.json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			copyDir(t, good, dir)
			c.spoil(dir)
			nc2, js2 := natstest.Start(t).Connect(t)
			rep, err := Restore(ctx, nc2, dir, RestoreOptions{Shards: c.shards})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("restore: %v, want %q", err, c.want)
			}
			n := 0
			for range js2.StreamNames(ctx).Name() {
				n++
			}
			if n != 0 || rep.Streams != 0 {
				t.Fatalf("%d streams on the target after a refused restore (report %d)", n, rep.Streams)
			}
		})
	}
}

func dropStream(ss []Stream, name string) []Stream {
	var out []Stream
	for _, s := range ss {
		if s.Name != name {
			out = append(out, s)
		}
	}
	return out
}

// TestRestoreSaysWhatIsLeft: a stream file corrupt in a way its checksum
// does not show (the manifest rewritten to match) is refused by the
// server; the error says how many streams were restored before it and
// that the target holds a partial restore, and --force replaces it.
func TestRestoreSaysWhatIsLeft(t *testing.T) {
	_, nc, _ := seeded(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "b")
	m, err := Backup(ctx, nc, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(t.TempDir(), "good")
	copyDir(t, dir, good)
	bad := 3
	path := filepath.Join(dir, m.Streams[bad].File)
	if err := os.WriteFile(path, []byte("not a snapshot at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	editManifest(t, dir, func(m *Manifest) {
		s := &m.Streams[bad]
		b, _ := os.ReadFile(path)
		s.Bytes, s.SHA256 = int64(len(b)), sha(b)
	})
	nc2, js2 := natstest.Start(t).Connect(t)
	rep, err := Restore(ctx, nc2, dir, RestoreOptions{})
	want := fmt.Sprintf("restored %d of %d streams; the target holds a partial restore", bad, len(m.Streams))
	if err == nil || !strings.Contains(err.Error(), want) || rep.Streams != bad {
		t.Fatalf("restore: %v (%d restored), want %q", err, rep.Streams, want)
	}
	if _, err := js2.Stream(ctx, m.Streams[bad].Name); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("the refused stream exists: %v", err)
	}
	if _, err := Restore(ctx, nc2, good, RestoreOptions{}); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("a restore onto the partial one: %v", err)
	}
	if rep, err := Restore(ctx, nc2, good, RestoreOptions{Force: true}); err != nil || rep.Streams != len(m.Streams) || len(rep.Deleted) != bad {
		t.Fatalf("restore --force: %v %+v", err, rep)
	}
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func flip(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func cut(t *testing.T, path string) {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

func editManifest(t *testing.T, dir string, edit func(*Manifest)) {
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	edit(&m)
	if err := writeManifest(dir, m); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}

// TestBackupUnderTraffic: a writer keeps storing what the pipeline
// stores, in its order — a claim-checked body, then the transcript record
// that names it, then the session's memory covering that record — while
// the backup runs. In the restored copy every memory points at a record
// of its session that is there, and every record's body is there: the
// copy order keeps references inside the backup.
func TestBackupUnderTraffic(t *testing.T) {
	_, nc, js := seeded(t)
	ctx := context.Background()
	layout := prov.Layout()
	mem, _ := js.KeyValue(ctx, events.BucketMemory)
	obj, _ := js.ObjectStore(ctx, events.BucketBlobs)
	stop, done := make(chan struct{}), make(chan int)
	go func() {
		i := 0
		defer func() { done <- i }()
		for ; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			session := fmt.Sprintf("t%d", i%8)
			name := fmt.Sprintf("acme/%s/%d", session, i)
			if _, err := obj.PutBytes(ctx, name, []byte(name)); err != nil {
				return
			}
			m := nats.NewMsg(layout.Subject("acme", session))
			m.Header.Set("Ref", name)
			m.Data = []byte(name)
			ack, err := js.PublishMsg(ctx, m)
			if err != nil {
				return
			}
			if _, err := mem.Put(ctx, events.MemoryKey("acme", session), []byte(fmt.Sprint(ack.Sequence))); err != nil {
				return
			}
		}
	}()
	dir := filepath.Join(t.TempDir(), "b")
	_, err := Backup(ctx, nc, dir, Options{})
	close(stop)
	written := <-done
	if err != nil {
		t.Fatal(err)
	}
	nc2, js2 := natstest.Start(t).Connect(t)
	if _, err := Restore(ctx, nc2, dir, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	checked := checkReferences(t, js2, layout)
	t.Logf("%d writes during the backup; %d memories checked", written, checked)
	if written < 20 || checked < 8 {
		t.Fatalf("only %d writes during the backup, %d memories: the test shows nothing", written, checked)
	}
}

// checkReferences checks every t* memory's record and every record's
// body in the restored copy and returns how many memories it checked.
func checkReferences(t *testing.T, js jetstream.JetStream, layout events.Layout) int {
	t.Helper()
	ctx := context.Background()
	mem, _ := js.KeyValue(ctx, events.BucketMemory)
	obj, _ := js.ObjectStore(ctx, events.BucketBlobs)
	n := 0
	for session := range 8 {
		id := fmt.Sprintf("t%d", session)
		e, err := mem.Get(ctx, events.MemoryKey("acme", id))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var seq uint64
		fmt.Sscan(string(e.Value()), &seq)
		s, _ := js.Stream(ctx, layout.Stream("acme", id))
		m, err := s.GetMsg(ctx, seq)
		if err != nil || m.Subject != layout.Subject("acme", id) {
			t.Errorf("%s's memory covers record %d, which the restored transcript does not hold: %v", id, seq, err)
			continue
		}
		if _, err := obj.GetInfo(ctx, m.Header.Get("Ref")); err != nil {
			t.Errorf("record %d names the body %s, which is not restored: %v", seq, m.Header.Get("Ref"), err)
		}
		n++
	}
	return n
}

// TestBackupRefusesMemoryStorage: streams kept in memory cannot be
// snapshotted; the backup says so before it copies anything.
func TestBackupRefusesMemoryStorage(t *testing.T) {
	nc, js := natstest.Start(t).Connect(t)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 4, Shards: 2, MemoryStorage: true}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "b")
	_, err := Backup(ctx, nc, dir, Options{})
	if !errors.Is(err, ErrMemoryStorage) || !strings.Contains(err.Error(), "RECALL_MEMORY_STORAGE") {
		t.Fatalf("backup of memory streams: %v", err)
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Fatalf("the refused backup wrote %d files", len(files))
	}
}

// TestBackupRestoreCluster: a three-node cluster with R3 streams is backed
// up (each snapshot by its stream's leader) and restored into another
// three-node cluster, every message at its sequence.
func TestBackupRestoreCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three-node clusters")
	}
	ctx := context.Background()
	p := provision.Config{Partitions: 4, Shards: 2, Replicas: 3}
	c := natstest.StartCluster(t, 3)
	nc, js := c.Connect(t)
	if err := provision.Ensure(ctx, js, p); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := js.Publish(ctx, p.Layout().Subject("acme", fmt.Sprintf("s%d", i%4)), []byte(fmt.Sprint("record ", i))); err != nil {
			t.Fatal(err)
		}
	}
	mem, _ := js.KeyValue(ctx, events.BucketMemory)
	if _, err := mem.Put(ctx, events.MemoryKey("acme", "s1"), []byte("memory")); err != nil {
		t.Fatal(err)
	}
	before := contents(t, js)
	dir := filepath.Join(t.TempDir(), "b")
	if _, err := Backup(ctx, nc, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	nc2, js2 := natstest.StartCluster(t, 3).Connect(t)
	if _, err := Restore(ctx, nc2, dir, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	after := contents(t, js2)
	for name, msgs := range before {
		for seq, want := range msgs {
			if got := after[name][seq]; got != want {
				t.Errorf("%s #%d: %.60q, want %.60q", name, seq, got, want)
			}
		}
	}
	s, err := js2.Stream(ctx, events.TranscriptShardStream(0))
	if err != nil || s.CachedInfo().Config.Replicas != 3 {
		t.Fatalf("the restored shard: %v", err)
	}
}
