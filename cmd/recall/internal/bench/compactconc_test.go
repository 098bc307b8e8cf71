package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// TestRunConcurrently checks that every index runs once, refusals are not
// sampled, and another error is returned.
func TestRunConcurrently(t *testing.T) {
	var seen [100]atomic.Int32
	lat, _, err := runConcurrently(context.Background(), 7, 100, func(_ context.Context, i int) error {
		seen[i].Add(1)
		if i%10 == 0 {
			return errRefused
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if n := seen[i].Load(); n != 1 {
			t.Errorf("index %d ran %d times, want once", i, n)
		}
	}
	if len(lat) != 90 {
		t.Errorf("%d latencies, want 90 (the 10 refusals are not sampled)", len(lat))
	}
	boom := errors.New("boom")
	_, _, err = runConcurrently(context.Background(), 2, 1000, func(_ context.Context, i int) error {
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
}
