package pcgroup

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Handler handles one message. It may settle the message itself (Msg.Ack,
// Msg.Term, Msg.Nak); when it returns without doing so, the group acks it on
// a nil error and naks it with Config.RetryDelay on an error. The context is
// cancelled when the member stops or loses the partition and DrainTimeout
// has passed.
type Handler func(ctx context.Context, m *Msg) error

// Msg is a message of one partition. It wraps the JetStream message and
// exposes only its content and the three ways to settle it, so that every
// settlement goes through the group's settled flag (which stops the
// in-progress acks).
type Msg struct {
	msg delivery
	// Partition is the partition the message came from.
	Partition int
	settled   atomic.Bool
}

// Subject is the message's stored subject.
func (m *Msg) Subject() string { return m.msg.Subject() }

// Headers are the message's headers.
func (m *Msg) Headers() nats.Header { return m.msg.Headers() }

// Data is the message's payload.
func (m *Msg) Data() []byte { return m.msg.Data() }

// Metadata is the message's JetStream metadata (sequences, deliveries).
func (m *Msg) Metadata() (*jetstream.MsgMetadata, error) { return m.msg.Metadata() }

// Ack acknowledges the message and waits for the server to confirm it, so a
// nil error means the message will not be redelivered.
func (m *Msg) Ack(ctx context.Context) error {
	m.settled.Store(true)
	return m.msg.DoubleAck(ctx)
}

// Term tells the server never to redeliver the message (a WorkQueue stream
// deletes it).
func (m *Msg) Term(reason string) error {
	m.settled.Store(true)
	return m.msg.TermWithReason(reason)
}

// Nak asks for redelivery after delay.
func (m *Msg) Nak(delay time.Duration) error {
	m.settled.Store(true)
	return m.msg.NakWithDelay(delay)
}

// handle runs the handler on m with in-progress acks, a concurrency slot and
// panic recovery, and settles m if the handler did not.
func (g *Group) handle(ctx context.Context, r *runner, jm jetstream.Msg, log *slog.Logger, prev <-chan struct{}) {
	m := &Msg{msg: jm, Partition: r.p}
	// Keep the message ours while waiting for a slot and while working.
	progressDone := make(chan struct{})
	var progressWG sync.WaitGroup
	progressWG.Add(1)
	go func() {
		defer progressWG.Done()
		t := time.NewTicker(g.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if m.settled.Load() {
					return
				}
				if err := jm.InProgress(); err != nil {
					log.DebugContext(ctx, "in-progress ack", "err", err)
				}
			case <-progressDone:
				return
			}
		}
	}()
	defer func() {
		close(progressDone)
		progressWG.Wait()
	}()
	// The key's previous message settles first, even when stopping: its
	// successor is handed back only after it, so the next owner sees them
	// in order. (Its handler is bounded by DrainTimeout.)
	if prev != nil {
		<-prev
	}
	switch g.acquire(ctx, r, m, log) {
	case slotStopped:
		_ = m.Nak(0)
		return
	case slotShared:
		return
	}
	defer func() { <-g.sem }()
	err := g.call(ctx, m)
	if m.settled.Load() {
		return
	}
	g.settleDefault(ctx, m, err, log)
}

// settleDefault settles a message its handler left unsettled: a nak with
// RetryDelay after an error, else an ack.
func (g *Group) settleDefault(ctx context.Context, m *Msg, err error, log *slog.Logger) {
	if err != nil {
		log.WarnContext(ctx, "handler failed; redelivering", "err", err, "delay", g.cfg.RetryDelay)
		_ = m.Nak(g.cfg.RetryDelay)
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := m.Ack(actx); err != nil {
		log.WarnContext(ctx, "acking", "err", err)
	}
}

// takeSlot waits for a free message slot of r in keyed mode (always true
// otherwise); false when r stops first.
func (g *Group) takeSlot(r *runner) bool {
	if g.cfg.KeyOf == nil {
		return true
	}
	select {
	case r.slots <- struct{}{}:
		return true
	case <-r.stop:
		return false
	}
}

// releaseSlot frees a slot taken by takeSlot.
func (g *Group) releaseSlot(r *runner) {
	if g.cfg.KeyOf != nil {
		<-r.slots
	}
}

// dispatch handles jm: inline without KeyOf; in keyed mode on its own
// goroutine, after the previous message of its key.
func (g *Group) dispatch(ctx context.Context, r *runner, jm jetstream.Msg, log *slog.Logger) {
	if g.cfg.KeyOf == nil {
		g.handle(ctx, r, jm, log, nil)
		return
	}
	key := g.cfg.KeyOf(jm.Subject())
	done := make(chan struct{})
	r.mu.Lock()
	prev := r.last[key]
	r.last[key] = done
	r.mu.Unlock()
	r.handlers.Add(1)
	go func() {
		defer r.handlers.Done()
		defer g.releaseSlot(r)
		defer func() {
			r.mu.Lock()
			if r.last[key] == done {
				delete(r.last, key)
			}
			r.mu.Unlock()
			close(done)
		}()
		g.handle(ctx, r, jm, log, prev)
	}()
}

func (g *Group) call(ctx context.Context, m *Msg) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("handler panicked: %v", v)
		}
	}()
	return g.handler(ctx, m)
}
