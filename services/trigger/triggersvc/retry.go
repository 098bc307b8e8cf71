package triggersvc

import (
	"context"
	"log/slog"
	"time"
)

// attemptTimeout bounds one network call inside a retry loop.
const attemptTimeout = 5 * time.Second

// retry calls fn until it succeeds or ctx is done, waiting 100 ms, 200 ms,
// … up to 2 s between attempts, and logging every tenth failure. Each call
// gets a context bounded by attemptTimeout. It never gives up while ctx
// lives: the trigger stops taking work rather than skip an effect. It
// returns nil on success and ctx.Err() when ctx ended first.
func retry(ctx context.Context, log *slog.Logger, what string, fn func(ctx context.Context) error) error {
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := fn(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if attempt%10 == 1 {
			log.WarnContext(ctx, what+"; retrying", "attempt", attempt, "err", err, "in", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}
