package erase

import (
	"context"
	"time"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

// guardTick is how often the guard looks whether tombstones still live.
const guardTick = time.Second

// live returns the sessions whose tombstone lives, forgetting expired ones.
func (t *Tombstones) live() [][2]string {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var out [][2]string
	for key, tb := range t.m {
		if !now.Before(tb.until) {
			delete(t.m, key)
			continue
		}
		if tenant, session, ok := events.SplitSessionSubject(key); ok {
			out = append(out, [2]string{tenant, session})
		}
	}
	return out
}

// run watches only while a tombstone lives: with none, no replica reads
// the transcript or the buckets' writes for the guard's sake. When the
// first tombstone appears it starts the watches, then checks every live
// tombstone once (a write made between the erase and the start is removed
// too); when the last one expires it stops them. It ends with ctx.
func (g *guard) run(ctx context.Context) {
	backoff := retry.Policy{First: time.Second, Max: 30 * time.Second}.Backoff()
	for ctx.Err() == nil {
		if !g.waitFor(ctx, func() bool { return len(g.e.tombs.live()) > 0 }) {
			return
		}
		wctx, stop := context.WithCancel(ctx)
		if err := g.start(wctx); err != nil {
			stop()
			g.e.log.WarnContext(ctx, "starting the erase guard; retrying", "err", err)
			retry.Pause(ctx.Done(), backoff.Next())
			continue
		}
		backoff.Reset()
		for _, s := range g.e.tombs.live() {
			g.check(wctx, s[0], s[1])
		}
		g.waitFor(ctx, func() bool { return len(g.e.tombs.live()) == 0 })
		stop()
	}
}

// waitFor waits until cond holds, looking every guardTick and whenever a
// tombstone is added; false when ctx ended first.
func (g *guard) waitFor(ctx context.Context, cond func() bool) bool {
	t := time.NewTicker(guardTick)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		case <-g.e.tombs.added:
		}
	}
	return true
}
