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

// turn is a message's place among its key's messages in keyed mode: prev
// is closed when the key's previous message is settled, done when this one
// is. Without KeyOf both are nil.
type turn struct {
	key        string
	prev, done chan struct{}
}

// handle runs the handler on m with in-progress acks, a concurrency slot and
// panic recovery, and settles m if the handler did not.
func (g *Group) handle(ctx context.Context, r *runner, jm jetstream.Msg, log *slog.Logger, t turn) {
	m := &Msg{msg: jm, Partition: r.p}
	// Keep the message ours while waiting for a slot and while working.
	defer g.keepInProgress(ctx, m, jm, log)()
	switch g.start(ctx, r, m, t, log) {
	case slotStopped:
		g.handBack(ctx, m, jm, log)
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

// start waits for m's turn and a slot. Once the partition is lost, m goes
// back to the server (slotStopped) only when it is the last message of its
// key that this member holds, or when the drain is over (ctx ended);
// otherwise it runs here, so that a key never has two messages waiting for
// redelivery: the server does not keep its redelivery queue in order while
// no pull request may take from it (it moves the head to the tail each time
// it finds no taker), and the next owner would receive them in any order.
func (g *Group) start(ctx context.Context, r *runner, m *Msg, t turn, log *slog.Logger) slot {
	// The key's previous message settles first, even when stopping.
	// (Its handler is bounded by DrainTimeout.)
	if t.prev != nil {
		<-t.prev
	}
	if r.stopping() && g.lastHeld(r, t) {
		return slotStopped
	}
	s := g.acquire(ctx, r, m, log, r.stop)
	if s != slotStopped || ctx.Err() != nil || g.lastHeld(r, t) {
		return s
	}
	return g.acquire(ctx, r, m, log, nil)
}

// lastHeld reports, once r's partition is lost, whether the message of t
// is the last of its key that this member holds. In keyed mode it waits
// for the fetch loop to end first: its last pull request may still bring a
// later message of the key (and a message handed back before it ended
// would come back on it, behind a later one). Without KeyOf the fetch loop
// is the caller and holds that one message only.
func (g *Group) lastHeld(r *runner, t turn) bool {
	if t.done == nil {
		return true
	}
	<-r.fetched
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[t.key] == t.done
}

// keepInProgress sends in-progress acks for m every third of AckWait until
// m is settled or the returned stop is called.
func (g *Group) keepInProgress(ctx context.Context, m *Msg, jm jetstream.Msg, log *slog.Logger) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
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
			case <-done:
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
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

// handBack returns m (the message jm), which did not run, to the server
// for the partition's next owner. It naks jm as a request and waits for the
// server's answer: the server processes a plain nak apart from the unpin
// that follows it, so the next owner, pinned first, could fetch m's
// successors ahead of it. Once answered, m is queued for redelivery, and
// redeliveries come before new messages.
func (g *Group) handBack(ctx context.Context, m *Msg, jm jetstream.Msg, log *slog.Logger) {
	m.settled.Store(true)
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// "-NAK" is JetStream's nak; with a reply subject the server answers
	// once the message is queued for redelivery.
	if _, err := g.js.Conn().RequestWithContext(nctx, jm.Reply(), []byte("-NAK")); err != nil {
		log.WarnContext(ctx, "handing a message back for the next owner", "subject", jm.Subject(), "err", err)
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
		g.handle(ctx, r, jm, log, turn{})
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
		g.handle(ctx, r, jm, log, turn{key: key, prev: prev, done: done})
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
