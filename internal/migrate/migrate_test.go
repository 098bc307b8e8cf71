package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// errKilled simulates the process dying at a hook point.
var errKilled = errors.New("killed")

// migrate runs one migration of l on fresh connections, closed when it
// returns (a kill closes them with publishes in flight).
func (l *legacy) migrate(hook func(point string, n int64) error) (Report, error) {
	l.t.Helper()
	nc, err := nats.Connect(l.srv.ClientURL())
	if err != nil {
		l.t.Fatal(err)
	}
	defer nc.Close()
	bulk, err := nats.Connect(l.srv.ClientURL())
	if err != nil {
		l.t.Fatal(err)
	}
	defer bulk.Close()
	m, err := New(nc, bulk, Config{Provision: l.pc, IdleWait: 10 * time.Millisecond, MaxInFlight: 256,
		Log: slog.New(slog.NewTextHandler(testLog{l.t}, &slog.HandlerOptions{Level: slog.LevelWarn})), hook: hook})
	if err != nil {
		l.t.Fatal(err)
	}
	return m.Run(context.Background())
}

// testLog writes a migration's warnings to the test's log.
type testLog struct{ t *testing.T }

func (w testLog) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}

// killAt returns a hook that kills the migration the first time point
// reaches n.
func killAt(point string, n int64) func(string, int64) error {
	fired := false
	return func(p string, at int64) error {
		if p == point && at >= n && !fired {
			fired = true
			return errKilled
		}
		return nil
	}
}

func TestMigrate(t *testing.T) {
	l := newLegacy(t, fixtureOptions{records: 3000, sessions: 90, shards: 4})
	ctx := context.Background()
	if err := provision.Ensure(ctx, l.js, l.pc); !errors.Is(err, provision.ErrNeedsMigration) {
		t.Fatalf("provision before the migration: %v", err)
	}
	rep, err := l.migrate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != OutcomeMigrated || rep.Copied != 3000 || rep.Present != 0 || rep.Skipped != 0 || rep.Foreign != 0 || len(rep.Durables) != 12 {
		t.Fatalf("report %+v", rep)
	}
	if rep.Translated[events.BucketMemory] == 0 || rep.Translated[events.StreamExtract] != 6 || rep.Purged[events.BucketTriggerState] == 0 {
		t.Fatalf("report %+v", rep)
	}
	t.Logf("report %+v", rep)
	l.verify(l.pc.Layout())
	l.checkRerunIsNoOp()
}

// checkRerunIsNoOp runs the migration again: it reports that it was done
// and changes nothing.
func (l *legacy) checkRerunIsNoOp() {
	l.t.Helper()
	before := l.shardLasts()
	rep, err := l.migrate(nil)
	if err != nil || rep.Outcome != OutcomeAlready || rep.Shards != l.pc.Layout().Shards() || rep.CompletedAt.IsZero() {
		l.t.Fatalf("rerun: %+v %v", rep, err)
	}
	if after := l.shardLasts(); fmt.Sprint(after) != fmt.Sprint(before) {
		l.t.Fatalf("the rerun changed the shards: %v → %v", before, after)
	}
}

func (l *legacy) shardLasts() []uint64 {
	var out []uint64
	for _, name := range l.pc.Layout().Streams() {
		s, err := l.js.Stream(context.Background(), name)
		if err != nil {
			l.t.Fatal(err)
		}
		out = append(out, s.CachedInfo().State.LastSeq)
	}
	return out
}

// A migration killed anywhere — in the copy, mid-batch, while translating,
// while creating durables, while finishing — completes exactly once when it
// is run again, and killed twice as well.
func TestMigrateKilledResumesExactlyOnce(t *testing.T) {
	for _, c := range []struct {
		name  string
		kills [][2]any // (point, n) per run before the last
	}{
		{"frozen", [][2]any{{"frozen", int64(0)}}},
		{"first copy", [][2]any{{"copy", int64(1)}}},
		{"mid-batch", [][2]any{{"copy", int64(777)}}},
		{"last copy", [][2]any{{"copy", int64(3000)}}},
		{"twice in the copy", [][2]any{{"copy", int64(500)}, {"copy", int64(1201)}}},
		{"translating", [][2]any{{"translate", int64(3)}}},
		{"translating twice", [][2]any{{"translate", int64(2)}, {"translate", int64(40)}}},
		{"requeueing", [][2]any{{"request", int64(2)}}},
		{"durables", [][2]any{{"durable", int64(5)}}},
		{"finishing", [][2]any{{"finish", int64(1)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLegacy(t, fixtureOptions{records: 3000, sessions: 90, shards: 4})
			for _, k := range c.kills {
				if _, err := l.migrate(killAt(k[0].(string), k[1].(int64))); !errors.Is(err, errKilled) {
					t.Fatalf("kill at %v: %v", k, err)
				}
				if err := provision.Ensure(context.Background(), l.js, l.pc); !errors.Is(err, provision.ErrNeedsMigration) {
					t.Fatalf("provision accepts a half-migrated deployment: %v", err)
				}
			}
			rep, err := l.migrate(nil)
			if err != nil || rep.Outcome != OutcomeMigrated || rep.Copied+rep.Present != 3000 {
				t.Fatalf("resumed: %+v %v", rep, err)
			}
			l.verify(l.pc.Layout())
			l.checkRerunIsNoOp()
		})
	}
}
