package pcgroup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
)

// Work sharing (Config.Share, keyed mode). Partitions are owned by one
// member each, so a member whose partitions hold more keys than its slots
// can run waits while others idle. With sharing, a message that waits for a
// slot is offered to the other members: the owner keeps the message (its
// key stays held, its AckWait renewed, its settlement done by the owner),
// and a member with a free slot runs the handler on a copy and sends back
// how the handler settled it.
//
//   - Offer: a request on Config.Share (a micro endpoint in a queue group,
//     so one member answers): 503 when the member has no free slot, else
//     the lender's id; the lender then runs the handler.
//   - Result: the lender sends the settlement as a request on
//     Config.Share + ".result." + owner; the owner applies it to the real
//     message (ack, nak with delay, term, or the default for the handler's
//     error) and answers.
//   - Faults: when the lender leaves the membership (crash, stop past its
//     drain) before its result arrives, the owner naks the message for a
//     redelivery. A lender that is only slow may then still finish: like a
//     paused member (see "What is not guaranteed"), its writes must be
//     fenced.

// Sharing limits.
const (
	// offerTimeout bounds one offer's round trip.
	offerTimeout = 2 * time.Second
	// firstOfferWait, maxOfferWait: a waiting message first offers itself
	// after firstOfferWait, then backs off to maxOfferWait between offers
	// (with jitter) while every member is busy.
	firstOfferWait = 5 * time.Millisecond
	maxOfferWait   = 100 * time.Millisecond
	// resultDeadline bounds the lender's delivery of a result.
	resultDeadline = 15 * time.Second
)

// delivery is what Msg settles: a JetStream message, or a loan (a copy run
// for another member, whose settlement is recorded and sent back).
type delivery interface {
	Subject() string
	Headers() nats.Header
	Data() []byte
	Metadata() (*jetstream.MsgMetadata, error)
	DoubleAck(ctx context.Context) error
	NakWithDelay(delay time.Duration) error
	TermWithReason(reason string) error
}

// offer is a waiting message sent to another member.
type offer struct {
	ID        string                `json:"id"`
	From      string                `json:"from"`
	Partition int                   `json:"partition"`
	Subject   string                `json:"subject"`
	Header    nats.Header           `json:"header,omitempty"`
	Data      []byte                `json:"data"`
	Meta      jetstream.MsgMetadata `json:"meta"`
}

// acceptance is a lender's answer to an offer.
type acceptance struct {
	Member string `json:"member"`
}

// settlement is how the handler settled a loan.
type settlement struct {
	ID     string        `json:"id"`
	Settle string        `json:"settle,omitempty"` // ack, nak, term; "" = not settled by the handler
	Delay  time.Duration `json:"delay,omitempty"`
	Reason string        `json:"reason,omitempty"`
	Err    string        `json:"error,omitempty"` // the handler's error
}

// loan is the lender's copy of an offered message.
type loan struct {
	o  *offer
	mu sync.Mutex
	s  settlement
}

func (l *loan) Subject() string      { return l.o.Subject }
func (l *loan) Headers() nats.Header { return l.o.Header }
func (l *loan) Data() []byte         { return l.o.Data }
func (l *loan) Metadata() (*jetstream.MsgMetadata, error) {
	md := l.o.Meta
	return &md, nil
}
func (l *loan) DoubleAck(context.Context) error { return l.settle(settlement{Settle: "ack"}) }
func (l *loan) NakWithDelay(d time.Duration) error {
	return l.settle(settlement{Settle: "nak", Delay: d})
}
func (l *loan) TermWithReason(reason string) error {
	return l.settle(settlement{Settle: "term", Reason: reason})
}

func (l *loan) settle(s settlement) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s.Settle == "" {
		l.s = s
	}
	return nil
}

// sharing is the group's work-sharing state.
type sharing struct {
	offers  chan struct{} // bounds this member's offers and loans out
	pending sync.Map      // offer id → chan settlement
	// lending: the loans' context (nil: not lending); loans counts the
	// handlers running for others. Both change under mu.
	mu      sync.Mutex
	lendCtx context.Context
	cancel  context.CancelFunc
	loans   sync.WaitGroup
	// out: this member's messages another member ran; in: other members'
	// messages this member ran.
	out, in atomic.Uint64
}

// Shared returns how many of this member's messages other members ran
// (out) and how many of theirs this member ran (in).
func (g *Group) Shared() (out, in uint64) { return g.share.out.Load(), g.share.in.Load() }

// AddShareEndpoints serves this member's side of work sharing on svc: the
// offers of other members (queue group) and the results of its own offers.
// It is an error without Config.Share or KeyOf. Call it before Run.
func (g *Group) AddShareEndpoints(svc micro.Service) error {
	if g.cfg.Share == "" || g.cfg.KeyOf == nil {
		return fmt.Errorf("%w: work sharing needs Share and KeyOf", ErrInvalidConfig)
	}
	if err := svc.AddEndpoint("share", micro.HandlerFunc(g.serveOffer), micro.WithEndpointSubject(g.cfg.Share)); err != nil {
		return err
	}
	if err := svc.AddEndpoint("share-result", micro.HandlerFunc(g.serveResult), micro.WithEndpointSubject(g.resultSubject(g.cfg.Member))); err != nil {
		return err
	}
	g.share.mu.Lock()
	g.shareOn = true
	g.share.mu.Unlock()
	return nil
}

func (g *Group) resultSubject(member string) string { return g.cfg.Share + ".result." + member }

// slot is how acquire ended.
type slot int

const (
	slotLocal   slot = iota // a local slot is taken: run the handler here
	slotShared              // another member ran it; m is settled
	slotStopped             // stopping before either
)

// acquire waits for one of this member's slots; with sharing it offers m
// to the others meanwhile, backing off while they are busy too.
func (g *Group) acquire(ctx context.Context, r *runner, m *Msg, log *slog.Logger) slot {
	select {
	case g.sem <- struct{}{}:
		return slotLocal
	default:
	}
	g.share.mu.Lock()
	on := g.shareOn
	g.share.mu.Unlock()
	wait := firstOfferWait
	for {
		var offerNow <-chan time.Time
		var t *time.Timer
		if on {
			t = time.NewTimer(wait/2 + rand.N(wait))
			offerNow = t.C
		}
		select {
		case g.sem <- struct{}{}:
			stopTimer(t)
			return slotLocal
		case <-r.stop:
			stopTimer(t)
			return slotStopped
		case <-ctx.Done():
			stopTimer(t)
			return slotStopped
		case <-offerNow:
		}
		if len(g.Members()) > 1 && g.offer(ctx, r, m, log) {
			return slotShared
		}
		wait = min(2*wait, maxOfferWait)
	}
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// offer offers m to the other members; true when one of them took it (m is
// settled then).
func (g *Group) offer(ctx context.Context, r *runner, m *Msg, log *slog.Logger) bool {
	select {
	case g.share.offers <- struct{}{}:
	default:
		return false // enough offers and loans out already
	}
	defer func() { <-g.share.offers }()
	o := offer{ID: nuid.Next(), From: g.cfg.Member, Partition: r.p, Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}
	if md, err := m.Metadata(); err == nil {
		o.Meta = *md
	}
	body, err := json.Marshal(o)
	if err != nil {
		return false
	}
	results := make(chan settlement, 1)
	g.share.pending.Store(o.ID, results)
	defer g.share.pending.Delete(o.ID)
	octx, cancel := context.WithTimeout(ctx, offerTimeout)
	reply, err := g.js.Conn().RequestWithContext(octx, g.cfg.Share, body)
	cancel()
	if err != nil || reply.Header.Get(micro.ErrorCodeHeader) != "" {
		return false
	}
	var a acceptance
	if json.Unmarshal(reply.Data, &a) != nil || a.Member == "" {
		return false
	}
	g.share.out.Add(1)
	s, ok := g.awaitResult(ctx, a.Member, results)
	if !ok {
		log.WarnContext(ctx, "member running a shared message left before its result; redelivering", "lender", a.Member, "subject", o.Subject)
		_ = m.Nak(g.cfg.RetryDelay)
		return true
	}
	g.applySettlement(ctx, m, s, a.Member, log)
	return true
}

// awaitResult waits for the lender's result while it is a member; false
// when it left first or ctx ended.
func (g *Group) awaitResult(ctx context.Context, lender string, results <-chan settlement) (settlement, bool) {
	for {
		changed := g.Changed()
		if !slices.Contains(g.Members(), lender) {
			select {
			case s := <-results:
				return s, true
			default:
				return settlement{}, false
			}
		}
		select {
		case s := <-results:
			return s, true
		case <-changed:
		case <-ctx.Done():
			return settlement{}, false
		}
	}
}

// applySettlement settles m the way the lender's handler settled its copy.
func (g *Group) applySettlement(ctx context.Context, m *Msg, s settlement, lender string, log *slog.Logger) {
	switch s.Settle {
	case "nak":
		_ = m.Nak(s.Delay)
		return
	case "term":
		_ = m.Term(s.Reason)
		return
	case "":
		if s.Err != "" {
			log.WarnContext(ctx, "handler failed on another member; redelivering", "lender", lender, "err", s.Err, "delay", g.cfg.RetryDelay)
			_ = m.Nak(g.cfg.RetryDelay)
			return
		}
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := m.Ack(actx); err != nil {
		log.WarnContext(ctx, "acking", "err", err)
	}
}

// serveOffer answers another member's offer: 503 without a free slot, else
// this member's id, and then runs the handler on the copy.
func (g *Group) serveOffer(req micro.Request) {
	var o offer
	if err := json.Unmarshal(req.Data(), &o); err != nil || o.ID == "" || o.From == "" || o.Subject == "" {
		_ = req.Error("400", "invalid offer", nil)
		return
	}
	if o.From == g.cfg.Member {
		_ = req.Error("503", "an offer of this member", nil)
		return
	}
	ctx, ok := g.startLoan()
	if !ok {
		_ = req.Error("503", "no free slot", nil)
		return
	}
	b, _ := json.Marshal(acceptance{Member: g.cfg.Member})
	if err := req.Respond(b); err != nil {
		g.endLoan()
		return
	}
	go g.runLoan(ctx, &o)
}

// startLoan takes a free slot for a loan; false when there is none or the
// member is not lending.
func (g *Group) startLoan() (context.Context, bool) {
	g.share.mu.Lock()
	defer g.share.mu.Unlock()
	if g.share.lendCtx == nil {
		return nil, false
	}
	select {
	case g.sem <- struct{}{}:
	default:
		return nil, false
	}
	g.share.loans.Add(1)
	return g.share.lendCtx, true
}

func (g *Group) endLoan() {
	<-g.sem
	g.share.loans.Done()
}

// runLoan runs the handler on a copy and sends the settlement to its owner.
func (g *Group) runLoan(ctx context.Context, o *offer) {
	g.share.in.Add(1)
	l := &loan{o: o}
	err := g.call(ctx, &Msg{msg: l, Partition: o.Partition})
	g.endLoan()
	l.mu.Lock()
	s := l.s
	l.mu.Unlock()
	s.ID = o.ID
	if err != nil {
		s.Err = err.Error()
	}
	g.sendResult(ctx, o, s)
}

// sendResult delivers s to the offer's owner, retrying until it answers,
// it is gone (no responders, or it no longer waits) or resultDeadline.
func (g *Group) sendResult(ctx context.Context, o *offer, s settlement) {
	body, _ := json.Marshal(s)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resultDeadline)
	defer cancel()
	log := g.log.With("member", g.cfg.Member, "owner", o.From, "subject", o.Subject)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		actx, acancel := context.WithTimeout(rctx, offerTimeout)
		reply, err := g.js.Conn().RequestWithContext(actx, g.resultSubject(o.From), body)
		acancel()
		switch {
		case err == nil && reply.Header.Get(micro.ErrorCodeHeader) != "":
			log.DebugContext(rctx, "owner no longer waits for the shared result", "err", reply.Header.Get(micro.ErrorHeader))
			return
		case err == nil:
			return
		case errors.Is(err, nats.ErrNoResponders):
			log.DebugContext(rctx, "owner of the shared message is gone")
			return
		}
		select {
		case <-time.After(wait):
		case <-rctx.Done():
			log.WarnContext(rctx, "could not deliver the result of a shared message; the owner redelivers it", "err", err)
			return
		}
	}
}

// serveResult hands a lender's result to the waiting offer.
func (g *Group) serveResult(req micro.Request) {
	var s settlement
	if err := json.Unmarshal(req.Data(), &s); err != nil || s.ID == "" {
		_ = req.Error("400", "invalid result", nil)
		return
	}
	v, ok := g.share.pending.Load(s.ID)
	if !ok {
		_ = req.Error("404", "no offer "+s.ID+" waits", nil)
		return
	}
	select {
	case v.(chan settlement) <- s:
	default: // a duplicate delivery
	}
	_ = req.Respond([]byte(`{}`))
}

// startLending lets other members' offers in, with handlers' context ctx.
func (g *Group) startLending(ctx context.Context) {
	g.share.mu.Lock()
	defer g.share.mu.Unlock()
	g.share.lendCtx, g.share.cancel = context.WithCancel(context.WithoutCancel(ctx))
}

// stopLending refuses new offers, lets the loans finish for up to
// DrainTimeout, then cancels them and waits for them to return.
func (g *Group) stopLending() {
	g.share.mu.Lock()
	cancel := g.share.cancel
	g.share.lendCtx, g.share.cancel = nil, nil
	g.share.mu.Unlock()
	if cancel == nil {
		return
	}
	defer cancel()
	done := make(chan struct{})
	go func() {
		g.share.loans.Wait()
		close(done)
	}()
	t := time.NewTimer(g.cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		cancel()
		<-done
	}
}
