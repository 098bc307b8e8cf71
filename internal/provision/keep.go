package provision

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// balancePass bounds one pass of KeepBalanced: its reads, its stepdowns
// and the wait for their elections.
const balancePass = 30 * time.Second

// KeepBalanced balances the leaders of the shard streams of c and of their
// durable consumers (BalanceLeaders) every c.BalanceEvery, jittered by up
// to a fifth either way so that processes started together do not look at
// once, until ctx ends; the first pass comes one period after the call
// (Open balanced at start). Each pass is bounded by balancePass and logged
// (each move; a set left alone; a failure), and nothing fails the caller: a
// view that is not complete or settled, or a request that failed, is looked
// at again in the next pass. It returns at once on a single server
// (Replicas 1) or when BalanceEvery is negative, and otherwise when ctx
// ends (a pass under way is cancelled). Safe to run in many processes at
// once.
func KeepBalanced(ctx context.Context, js jetstream.JetStream, c Config, log *slog.Logger) {
	c = c.withDefaults()
	if c.Replicas <= 1 || c.BalanceEvery < 0 {
		return
	}
	t := time.NewTimer(jittered(c.BalanceEvery))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, balancePass)
		moves, err := BalanceLeaders(pctx, js, c)
		cancel()
		if ctx.Err() != nil {
			return
		}
		logBalance(log, moves, err)
		t.Reset(jittered(c.BalanceEvery))
	}
}

// jittered is d scaled by a random factor in [0.8, 1.2).
func jittered(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
