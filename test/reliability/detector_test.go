package reliability

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/recallhq/recall/internal/llm"
)

// overlapDetector wraps the extractors' model and records, per session
// (per notes path), how many model calls are in flight. Calls of one
// extraction are sequential, so two calls of one session in flight at once
// mean two extractions of that session overlapped. Delay widens each call so
// an overlap, if the fencing allowed one, would be seen.
type overlapDetector struct {
	inner llm.Provider
	delay time.Duration

	mu       sync.Mutex
	inFlight map[string]int
	first    string

	calls    atomic.Int64
	overlaps atomic.Int64
	errors   atomic.Int64
	sessions sync.Map // notes path -> struct{}
}

func newOverlapDetector(inner llm.Provider, delay time.Duration) *overlapDetector {
	return &overlapDetector{inner: inner, delay: delay, inFlight: map[string]int{}}
}

func (d *overlapDetector) Name() string  { return d.inner.Name() }
func (d *overlapDetector) Model() string { return d.inner.Model() }

func (d *overlapDetector) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	key := req.NotesPath
	d.calls.Add(1)
	d.sessions.Store(key, struct{}{})
	d.mu.Lock()
	d.inFlight[key]++
	if n := d.inFlight[key]; n > 1 {
		d.overlaps.Add(1)
		if d.first == "" {
			d.first = fmt.Sprintf("%s: %d model calls in flight at %s", key, n, time.Now().Format(time.StampMilli))
		}
	}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.inFlight[key]--
		d.mu.Unlock()
	}()
	if d.delay > 0 {
		select {
		case <-time.After(d.delay):
		case <-ctx.Done():
			d.errors.Add(1)
			return nil, ctx.Err()
		}
	}
	resp, err := d.inner.Complete(ctx, req)
	if err != nil {
		d.errors.Add(1)
	}
	return resp, err
}

// First describes the first overlap seen ("" when none).
func (d *overlapDetector) First() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.first
}
