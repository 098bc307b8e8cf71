package stack

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/embedded"
	"github.com/recallhq/recall/internal/migrate"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// seedLegacy creates the single transcript stream of deployments before
// shards and stores n records over a few sessions.
func seedLegacy(t *testing.T, js jetstream.JetStream, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, migrate.LegacyStreamConfig(provision.Config{})); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := js.Publish(ctx, events.LegacyTranscriptSubject("acme", string(rune('a'+i%5))), []byte(`{"role":"user"}`)); err != nil {
			t.Fatal(err)
		}
	}
}

// recall up on a data directory with a legacy transcript migrates it
// before provisioning.
func TestStackMigratesALegacyDataDir(t *testing.T) {
	srv, err := embedded.Start(embedded.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	seedLegacy(t, js, 40)
	st := &Stack{srv: srv, NATSURL: srv.ClientURL(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	pc := provision.Config{Shards: 2}
	if err := st.provision(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	info, err := provision.LegacyTranscript(context.Background(), js)
	if err != nil || info == nil || !info.Config.Sealed {
		t.Fatalf("legacy stream after recall up: %+v %v", info, err)
	}
	var total uint64
	for _, name := range pc.Layout().Streams() {
		s, err := js.Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		total += s.CachedInfo().State.Msgs
	}
	if total != 40 {
		t.Fatalf("%d records in the shards, want 40", total)
	}
}
