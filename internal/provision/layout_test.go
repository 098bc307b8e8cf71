package provision_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// TestShardMatchesServerPartition checks events.Layout against the
// server's own {{partition(n,1,2)}} transform: the shard of a session is
// what a NATS subject mapping would compute, so an operator may route with
// one (docs/operations.md, "Shards").
func TestShardMatchesServerPartition(t *testing.T) {
	for _, n := range []int{1, 3, 4, 12, 16, 64} {
		tr, err := server.NewSubjectTransform(events.SubjectTranscriptRoot+".*.*", fmt.Sprintf("{{partition(%d,1,2)}}", n))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 500 {
			tenant, session := fmt.Sprintf("tenant-%d", i%7), fmt.Sprintf("s%04d_%x", i, i*7919)
			got, err := tr.Match(events.LegacyTranscriptSubject(tenant, session))
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprint(events.NewLayout(n).Shard(tenant, session)); got != want {
				t.Fatalf("%s/%s among %d: server %s, Layout %s", tenant, session, n, got, want)
			}
		}
	}
}

func TestShardStreamsRecordTheirCount(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, provision.Config{Shards: 3}); err != nil {
		t.Fatal(err)
	}
	layout, err := provision.DiscoverLayout(ctx, js)
	if err != nil || layout.Shards() != 3 {
		t.Fatalf("DiscoverLayout = %d, %v", layout.Shards(), err)
	}
	err = provision.Ensure(ctx, js, provision.Config{Shards: 5})
	if !errors.Is(err, provision.ErrIncompatible) || !strings.Contains(err.Error(), "RECALL_SHARDS=3") {
		t.Fatalf("another shard count: err = %v, want ErrIncompatible saying RECALL_SHARDS=3", err)
	}
	// A record lands only in its own shard.
	for i := range 30 {
		session := fmt.Sprintf("s%d", i)
		if _, err := js.Publish(ctx, layout.Subject("acme", session), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for k, name := range layout.Streams() {
		st, _ := js.Stream(ctx, name)
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatal(err)
		}
		for subj := range info.State.Subjects {
			if got, _, _, ok := events.ParseTranscriptSubject(subj); !ok || got != k {
				t.Errorf("stream %s holds %s", name, subj)
			}
		}
	}
}

func TestLegacyTranscriptNeedsMigration(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	legacy := jetstream.StreamConfig{Name: provision.StreamLegacyTranscript, Subjects: []string{events.SubjectTranscriptRoot + ".*.*"}, Storage: jetstream.MemoryStorage}
	if _, err := js.CreateStream(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, events.LegacyTranscriptSubject("acme", "s1"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	err := provision.Ensure(ctx, js, provision.Config{MemoryStorage: true})
	if !errors.Is(err, provision.ErrNeedsMigration) || !errors.Is(err, provision.ErrIncompatible) || !strings.Contains(err.Error(), "recall migrate") {
		t.Fatalf("unmigrated legacy stream: err = %v", err)
	}
	legacy.Sealed = true
	if _, err := js.UpdateStream(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	if err := provision.Ensure(ctx, js, provision.Config{MemoryStorage: true}); err != nil {
		t.Fatalf("sealed (migrated) legacy stream: %v", err)
	}
}
