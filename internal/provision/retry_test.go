package provision_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/retry"
)

// TestStartup: a failing attempt is retried until it succeeds; a hung attempt
// is abandoned after AttemptTimeout; a Permanent error ends at once (and is
// returned unmarked); the caller's context ends the retry.
func TestStartup(t *testing.T) {
	ctx := context.Background()
	n := 0
	err := provision.Startup.Do(ctx, nil, "flaky", func(context.Context) error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("flaky: err %v after %d attempts", err, n)
	}

	n = 0
	start := time.Now()
	err = provision.Startup.Do(ctx, nil, "hung once", func(actx context.Context) error {
		if n++; n == 1 {
			<-actx.Done() // a request nobody answers
			return actx.Err()
		}
		return nil
	})
	if d := time.Since(start); err != nil || n != 2 || d < provision.AttemptTimeout || d > provision.AttemptTimeout+2*time.Second {
		t.Fatalf("hung once: err %v, %d attempts, %v", err, n, d)
	}

	bad := errors.New("incompatible")
	n = 0
	err = provision.Startup.Do(ctx, nil, "permanent", func(context.Context) error { n++; return retry.Permanent(bad) })
	if err != bad || n != 1 {
		t.Fatalf("permanent: err %v after %d attempts", err, n)
	}

	cctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
	defer cancel()
	err = provision.Startup.Do(cctx, nil, "down", func(context.Context) error { return errors.New("down") })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("context end: %v", err)
	}
}
