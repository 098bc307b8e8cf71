package erase

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/events"
)

// Reapply erases t's session again, for a restore that brought back data
// older than the erase (internal/backup): it writes the tombstone again
// for what is left of its life (not at all once it has expired: the
// session id may be used again), then removes every trace of the session
// and announces the erase as Session does, without the drain (a restore
// runs before anything ingests). An error leaves the session partly
// erased; reapplying again completes it.
func (e *Eraser) Reapply(ctx context.Context, t events.Tombstone, by Actor) (events.EraseReceipt, error) {
	r := events.EraseReceipt{Tenant: t.Tenant, Session: t.Session, Parts: []events.ErasedPart{}, ErasedAt: time.Now().UTC(), TombstoneUntil: t.Until}
	if err := validate(t.Tenant, t.Session); err != nil {
		return r, err
	}
	if left := time.Until(t.Until).Truncate(time.Second); left >= time.Second {
		b, _ := json.Marshal(t)
		if _, err := store.PutTTL(ctx, e.js, events.BucketTombstones, events.TombstoneKey(t.Tenant, t.Session), b, left, 0); err != nil {
			return r, fmt.Errorf("writing the tombstone: %w", err)
		}
		e.tombs.add(t.Tenant, t.Session, t.Until, time.Now())
	}
	return r, e.finish(ctx, &r, by)
}
