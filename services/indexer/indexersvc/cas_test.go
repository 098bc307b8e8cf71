package indexersvc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/events"
)

// TestModifyGivesUpAfterItsCap: a compare-and-set that loses every race
// (another writer changes the entry between each load and write) is tried
// casRetry.Attempts times and then fails with an error wrapping
// store.ErrConflict; one that loses a few races writes on the next try.
func TestModifyGivesUpAfterItsCap(t *testing.T) {
	_, _, js, _ := provisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, events.BucketIndex)
	if err != nil {
		t.Fatal(err)
	}
	s := &entries{kv: kv, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	key := events.MemoryKey("acme", "s1")
	racing := func(losses int) (int, error) {
		calls := 0
		_, _, err := s.modify(ctx, "acme", "s1", func(v *stored) bool {
			if calls++; calls <= losses {
				// Another writer wins the race after this load.
				if _, err := kv.Put(ctx, key, []byte(`{"tenant":"acme","session":"s1"}`)); err != nil {
					t.Fatal(err)
				}
			}
			v.Summary = "mine"
			return true
		})
		return calls, err
	}

	calls, err := racing(1000)
	if !errors.Is(err, store.ErrConflict) || calls != casRetry.Attempts {
		t.Fatalf("always losing: err %v after %d attempts, want ErrConflict after %d", err, calls, casRetry.Attempts)
	}
	calls, err = racing(3)
	if err != nil || calls != 4 {
		t.Fatalf("losing three races: err %v after %d attempts, want nil after 4", err, calls)
	}
	v, _, err := s.load(ctx, "acme", "s1")
	if err != nil || v.Summary != "mine" {
		t.Fatalf("after the write: %+v, %v", v, err)
	}
}
