package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/migrate"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// legacyTranscript creates the single transcript stream of deployments
// before shards and stores n records over a few sessions.
func legacyTranscript(t *testing.T, js jetstream.JetStream, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, migrate.LegacyStreamConfig(provision.Config{})); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		m := nats.NewMsg(events.LegacyTranscriptSubject("acme", []string{"a", "b", "c", "d", "e"}[i%5]))
		m.Data = []byte(`{"role":"user"}`)
		m.Header.Set("ce-id", "ev"+string(rune('a'+i%26)))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}

// recall migrate: a dry run counts and changes nothing, a run migrates and
// says how to delete the legacy stream, a second run has nothing to do.
func TestMigrateCommand(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	legacyTranscript(t, js, 50)
	t.Setenv("RECALL_NATS_URL", s.ClientURL())
	run1 := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(context.Background(), append([]string{"migrate", "--idle-wait", "1ms"}, args...), &out); err != nil {
			t.Fatalf("recall migrate %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	out := run1("--shards", "3", "--dry-run")
	t.Log(out)
	for _, want := range []string{"Dry run: RECALL_TRANSCRIPT (not started) → 3 shards", "records: 50 ", "in 5 sessions", "shard  records  sessions"} {
		if !strings.Contains(out, want) {
			t.Fatalf("dry run lacks %q:\n%s", want, out)
		}
	}
	if info, _ := provision.LegacyTranscript(context.Background(), js); info.Config.Sealed || len(info.Config.Metadata) > 0 && info.Config.Metadata["recall.migrate.state"] != "" {
		t.Fatal("the dry run changed the legacy stream")
	}
	out = run1("--shards", "3")
	for _, want := range []string{"Migrated RECALL_TRANSCRIPT into 3 shards", "50 copied", "RECALL_SHARDS=3", "nats stream rm RECALL_TRANSCRIPT"} {
		if !strings.Contains(out, want) {
			t.Fatalf("migration output lacks %q:\n%s", want, out)
		}
	}
	t.Log(out)
	if out = run1("--shards", "3"); !strings.Contains(out, "Already migrated to 3 shards") {
		t.Fatalf("second run:\n%s", out)
	}
}
