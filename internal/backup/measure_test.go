package backup

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// TestMeasureBackup measures a backup and a restore of
// RECALL_BACKUP_MEASURE sessions of 60 records of ~1 KiB with a 4 KiB
// memory of 3 revisions and a 1 KiB index entry each (written straight
// into the streams) — the figures of docs/operations.md. Skipped unless
// the variable is set.
func TestMeasureBackup(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("RECALL_BACKUP_MEASURE"))
	if n == 0 {
		t.Skip("RECALL_BACKUP_MEASURE=N measures N sessions")
	}
	ctx := context.Background()
	p := provision.Config{Partitions: 16, Shards: 4}
	nc, js := natstest.Start(t).Connect(t)
	if err := provision.Ensure(ctx, js, p); err != nil {
		t.Fatal(err)
	}
	writeSessions(t, js, p.Layout(), n)
	dir := filepath.Join(t.TempDir(), "b")
	start := time.Now()
	m, err := Backup(ctx, nc, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	var size int64
	var msgs uint64
	for _, s := range m.Streams {
		size, msgs = size+s.Bytes, msgs+s.Messages
	}
	nc2, _ := natstest.Start(t).Connect(t)
	rep, err := Restore(ctx, nc2, dir, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d sessions, %d messages: backup %.1f MiB in %s, restore in %s", n, msgs, float64(size)/(1<<20), took.Round(time.Millisecond), rep.Elapsed.Round(time.Millisecond))
}

func writeSessions(t *testing.T, js jetstream.JetStream, layout events.Layout, n int) {
	ctx := context.Background()
	mem, _ := js.KeyValue(ctx, events.BucketMemory)
	idx, _ := js.KeyValue(ctx, events.BucketIndex)
	r := rand.New(rand.NewPCG(1, 2))
	text := func(size int) []byte {
		var b strings.Builder
		for b.Len() < size {
			b.WriteString(vocabulary[r.IntN(len(vocabulary))])
			b.WriteByte(' ')
		}
		return []byte(b.String())
	}
	for i := range n {
		session := fmt.Sprintf("s%05d", i)
		for range 60 {
			if _, err := js.PublishAsync(layout.Subject("acme", session), text(1024)); err != nil {
				t.Fatal(err)
			}
		}
		<-js.PublishAsyncComplete()
		for rev := range 3 {
			if _, err := mem.Put(ctx, events.MemoryKey("acme", session), append(text(4096), byte('0'+rev))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := idx.Put(ctx, events.MemoryKey("acme", session), text(1024)); err != nil {
			t.Fatal(err)
		}
	}
}

// vocabulary is 512 made-up words of 3 to 10 letters: text built from
// them compresses about as much as English.
var vocabulary = func() []string {
	r := rand.New(rand.NewPCG(3, 4))
	out := make([]string, 512)
	for i := range out {
		w := make([]byte, 3+r.IntN(8))
		for j := range w {
			w[j] = byte('a' + r.IntN(26))
		}
		out[i] = string(w)
	}
	return out
}()
