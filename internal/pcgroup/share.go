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
// slot may run on another member with a free slot: the owner keeps the
// message (its key stays held, its AckWait renewed, its settlement done by
// the owner) and the other member runs the handler on a copy and sends back
// how the handler settled it.
//
//   - Reserve: while messages wait, one prober per member asks the group
//     for a free slot: a small request on Config.Share (a micro endpoint in
//     a queue group, so one member answers), 503 when that member has none,
//     else the member's id and a reservation it holds for reserveTTL. While
//     every member is busy the prober backs off to one request per
//     maxProbeWait.
//   - Run: a waiting message takes the reservation and is sent to that
//     member (Config.Share.run.<member>), which answers at once and runs the
//     handler.
//   - Result: the lender sends the settlement as a request on
//     Config.Share.result.<owner>; the owner applies it to the real message
//     (ack, nak with delay, term, or the default for the handler's error)
//     and answers.
//   - Faults: when the lender leaves the membership (crash, stop past its
//     drain) before its result arrives, or says it no longer runs the
//     message while no result came (its delivery gave up; the owner asks
//     every Config.ShareCheck on Config.Share.status.<lender>), the owner
//     naks the message for a redelivery. A lender that is only slow may
//     then still finish: like a paused member (see "What is not
//     guaranteed"), its writes must be fenced.

// Sharing limits.
const (
	// shareTimeout bounds one sharing round trip.
	shareTimeout = 2 * time.Second
	// reserveTTL is how long a lender keeps a reserved slot for the message
	// that has not come.
	reserveTTL = 2 * time.Second
	// firstProbeWait, maxProbeWait: after a refused reservation the prober
	// waits firstProbeWait, doubling up to maxProbeWait (with jitter).
	firstProbeWait = 5 * time.Millisecond
	maxProbeWait   = 100 * time.Millisecond
	// grantWait is how long a reservation waits for a waiting message
	// before it is given back.
	grantWait = 100 * time.Millisecond
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

// reserveRequest asks for a free slot; grant is the answer.
type reserveRequest struct {
	From string `json:"from"`
}

type grant struct {
	Member      string `json:"member"`
	Reservation string `json:"reservation"`
}

// offer is a waiting message sent to the member that reserved a slot for
// it (Cancel: the reservation is given back unused).
type offer struct {
	Reservation string                `json:"reservation"`
	Cancel      bool                  `json:"cancel,omitempty"`
	ID          string                `json:"id"`
	From        string                `json:"from"`
	Partition   int                   `json:"partition"`
	Subject     string                `json:"subject"`
	Header      nats.Header           `json:"header,omitempty"`
	Data        []byte                `json:"data"`
	Meta        jetstream.MsgMetadata `json:"meta"`
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
	// Owner side: waiting counts the messages waiting for a slot; wake
	// tells the prober one started waiting; grants hands reservations to
	// them; pending maps an offer id to its result channel.
	waiting atomic.Int64
	wake    chan struct{}
	grants  chan grant
	pending sync.Map
	// Lender side: running holds the offer ids whose handler or result
	// delivery is not done. Under mu: lendCtx is the loans' context (nil:
	// not running), lending whether new reservations are taken, reserved
	// the slots held for announced messages, loans the reservations and the
	// handlers running for others.
	running  sync.Map
	mu       sync.Mutex
	lendCtx  context.Context
	cancel   context.CancelFunc
	lending  bool
	reserved map[string]*time.Timer
	loans    sync.WaitGroup
	// out: this member's messages another member ran; in: other members'
	// messages this member ran.
	out, in atomic.Uint64
}

// Shared returns how many of this member's messages other members ran
// (out) and how many of theirs this member ran (in).
func (g *Group) Shared() (out, in uint64) { return g.share.out.Load(), g.share.in.Load() }

// AddShareEndpoints serves this member's side of work sharing on svc:
// reservations and messages from other members, and the results of its own
// messages run elsewhere. It is an error without Config.Share or KeyOf.
// Call it before Run.
func (g *Group) AddShareEndpoints(svc micro.Service) error {
	if g.cfg.Share == "" || g.cfg.KeyOf == nil {
		return fmt.Errorf("%w: work sharing needs Share and KeyOf", ErrInvalidConfig)
	}
	eps := []struct {
		name, subject string
		h             micro.HandlerFunc
	}{
		{"share", g.cfg.Share, g.serveReserve},
		{"share-run", g.runSubject(g.cfg.Member), g.serveRun},
		{"share-result", g.resultSubject(g.cfg.Member), g.serveResult},
		{"share-status", g.statusSubject(g.cfg.Member), g.serveStatus},
	}
	for _, ep := range eps {
		if err := svc.AddEndpoint(ep.name, ep.h, micro.WithEndpointSubject(ep.subject)); err != nil {
			return err
		}
	}
	g.shareOn.Store(true)
	return nil
}

func (g *Group) runSubject(member string) string    { return g.cfg.Share + ".run." + member }
func (g *Group) resultSubject(member string) string { return g.cfg.Share + ".result." + member }
func (g *Group) statusSubject(member string) string { return g.cfg.Share + ".status." + member }

// slot is how acquire ended.
type slot int

const (
	slotLocal   slot = iota // a local slot is taken: run the handler here
	slotShared              // another member ran it; m is settled
	slotStopped             // stopping before either
)

// acquire waits for one of this member's slots; with sharing, a slot
// another member reserved serves too.
func (g *Group) acquire(ctx context.Context, r *runner, m *Msg, log *slog.Logger) slot {
	select {
	case g.sem <- struct{}{}:
		return slotLocal
	default:
	}
	var grants <-chan grant
	if g.shareOn.Load() {
		grants = g.share.grants
		g.share.waiting.Add(1)
		defer g.share.waiting.Add(-1)
		select {
		case g.share.wake <- struct{}{}:
		default:
		}
	}
	for {
		select {
		case g.sem <- struct{}{}:
			return slotLocal
		case <-r.stop:
			return slotStopped
		case <-ctx.Done():
			return slotStopped
		case gr := <-grants:
			if g.runElsewhere(ctx, r, m, gr, log) {
				return slotShared
			}
		}
	}
}

// probe runs while the group runs: whenever messages wait for a slot it
// reserves slots of other members and hands them to the waiting messages.
func (g *Group) probe(ctx context.Context) {
	wait := firstProbeWait
	for ctx.Err() == nil {
		if g.share.waiting.Load() == 0 {
			select {
			case <-g.share.wake:
			case <-ctx.Done():
			}
			continue
		}
		var gr grant
		ok := len(g.Members()) > 1 && g.reserve(ctx, &gr)
		if !ok {
			sleep(ctx, wait/2+rand.N(wait))
			wait = min(2*wait, maxProbeWait)
			continue
		}
		wait = firstProbeWait
		t := time.NewTimer(grantWait)
		select {
		case g.share.grants <- gr:
		case <-t.C:
			g.giveBack(gr) // nobody waits any more
		case <-ctx.Done():
			g.giveBack(gr)
		}
		t.Stop()
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// reserve asks the group for a free slot.
func (g *Group) reserve(ctx context.Context, gr *grant) bool {
	body, _ := json.Marshal(reserveRequest{From: g.cfg.Member})
	rctx, cancel := context.WithTimeout(ctx, shareTimeout)
	defer cancel()
	reply, err := g.js.Conn().RequestWithContext(rctx, g.cfg.Share, body)
	if err != nil || reply.Header.Get(micro.ErrorCodeHeader) != "" {
		return false
	}
	return json.Unmarshal(reply.Data, gr) == nil && gr.Member != "" && gr.Reservation != ""
}

// giveBack releases an unused reservation (it would expire anyway).
func (g *Group) giveBack(gr grant) {
	body, _ := json.Marshal(offer{Reservation: gr.Reservation, Cancel: true})
	_ = g.js.Conn().Publish(g.runSubject(gr.Member), body)
}

// runElsewhere sends m to the member that reserved a slot and waits for
// its result; true when that member took it (m is settled then).
func (g *Group) runElsewhere(ctx context.Context, r *runner, m *Msg, gr grant, log *slog.Logger) bool {
	o := offer{Reservation: gr.Reservation, ID: nuid.Next(), From: g.cfg.Member, Partition: r.p,
		Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}
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
	octx, cancel := context.WithTimeout(ctx, shareTimeout)
	reply, err := g.js.Conn().RequestWithContext(octx, g.runSubject(gr.Member), body)
	cancel()
	if err != nil || reply.Header.Get(micro.ErrorCodeHeader) != "" {
		return false
	}
	g.share.out.Add(1)
	s, why := g.awaitResult(ctx, gr.Member, o.ID, results)
	if why != "" {
		log.WarnContext(ctx, why+"; redelivering", "lender", gr.Member, "subject", o.Subject)
		_ = m.Nak(g.cfg.RetryDelay)
		return true
	}
	g.applySettlement(ctx, m, s, gr.Member, log)
	return true
}

// awaitResult waits for the lender's result of offer id while it is a
// member and runs the offer; why says what ended the wait otherwise.
func (g *Group) awaitResult(ctx context.Context, lender, id string, results <-chan settlement) (s settlement, why string) {
	check := time.NewTicker(g.cfg.ShareCheck)
	defer check.Stop()
	for {
		changed := g.Changed()
		if !slices.Contains(g.Members(), lender) {
			select {
			case s := <-results:
				return s, ""
			default:
				return settlement{}, "the member running a shared message left before its result"
			}
		}
		select {
		case s := <-results:
			return s, ""
		case <-changed:
		case <-check.C:
			if g.lenderRuns(ctx, lender, id) {
				continue
			}
			select {
			case s := <-results:
				return s, ""
			default:
				return settlement{}, "the member that ran a shared message no longer runs it and its result never came"
			}
		case <-ctx.Done():
			return settlement{}, "stopped waiting for a shared message's result"
		}
	}
}

// lenderRuns asks lender whether it still runs offer id (or delivers its
// result). No answer counts as yes: a lender that is gone leaves the
// membership, which awaitResult watches.
func (g *Group) lenderRuns(ctx context.Context, lender, id string) bool {
	sctx, cancel := context.WithTimeout(ctx, shareTimeout)
	defer cancel()
	reply, err := g.js.Conn().RequestWithContext(sctx, g.statusSubject(lender), []byte(id))
	if err != nil || reply.Header.Get(micro.ErrorCodeHeader) != "" {
		return true
	}
	var st loanStatus
	return json.Unmarshal(reply.Data, &st) != nil || st.Running
}

// loanStatus answers an owner's question about one of its offers.
type loanStatus struct {
	Running bool `json:"running"`
}

// serveStatus tells an owner whether this member still runs its offer.
func (g *Group) serveStatus(req micro.Request) {
	_, running := g.share.running.Load(string(req.Data()))
	body, _ := json.Marshal(loanStatus{Running: running})
	_ = req.Respond(body)
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
	case "ack":
		g.settleDefault(ctx, m, nil, log)
		return
	}
	var err error
	if s.Err != "" {
		err = errors.New(s.Err)
	}
	g.settleDefault(ctx, m, err, log.With("lender", lender))
}

// serveReserve answers another member's reservation: 503 without a free
// slot, else this member's id and a reservation held for reserveTTL.
func (g *Group) serveReserve(req micro.Request) {
	var rr reserveRequest
	if err := json.Unmarshal(req.Data(), &rr); err != nil || rr.From == "" {
		_ = req.Error("400", "invalid reservation request", nil)
		return
	}
	if rr.From == g.cfg.Member {
		_ = req.Error("503", "a request of this member", nil)
		return
	}
	id, ok := g.holdSlot()
	if !ok {
		_ = req.Error("503", "no free slot", nil)
		return
	}
	b, _ := json.Marshal(grant{Member: g.cfg.Member, Reservation: id})
	if err := req.Respond(b); err != nil {
		g.takeReservation(id, true)
	}
}

// holdSlot takes a free slot for reserveTTL; false when there is none or
// the member is not lending.
func (g *Group) holdSlot() (string, bool) {
	g.share.mu.Lock()
	defer g.share.mu.Unlock()
	if !g.share.lending {
		return "", false
	}
	select {
	case g.sem <- struct{}{}:
	default:
		return "", false
	}
	id := nuid.Next()
	g.share.loans.Add(1)
	g.share.reserved[id] = time.AfterFunc(reserveTTL, func() { g.takeReservation(id, true) })
	return id, true
}

// takeReservation removes reservation id; release also frees its slot
// (it was not used). It returns the loans' context, nil when id was not
// held (expired, unknown).
func (g *Group) takeReservation(id string, release bool) context.Context {
	g.share.mu.Lock()
	t, ok := g.share.reserved[id]
	delete(g.share.reserved, id)
	ctx := g.share.lendCtx
	g.share.mu.Unlock()
	if !ok {
		return nil
	}
	t.Stop()
	if release {
		g.endLoan()
		return nil
	}
	return ctx // set while a reservation exists: stopping waits for them
}

func (g *Group) endLoan() {
	<-g.sem
	g.share.loans.Done()
}

// serveRun starts the handler on a message sent for a reservation (or
// gives the reservation back).
func (g *Group) serveRun(req micro.Request) {
	var o offer
	if err := json.Unmarshal(req.Data(), &o); err != nil || o.Reservation == "" {
		_ = req.Error("400", "invalid shared message", nil)
		return
	}
	if o.Cancel {
		g.takeReservation(o.Reservation, true)
		return // published, not requested: no answer
	}
	if o.ID == "" || o.From == "" || o.Subject == "" {
		g.takeReservation(o.Reservation, true)
		_ = req.Error("400", "invalid shared message", nil)
		return
	}
	ctx := g.takeReservation(o.Reservation, false)
	if ctx == nil {
		_ = req.Error("410", "reservation "+o.Reservation+" expired", nil)
		return
	}
	g.share.running.Store(o.ID, struct{}{})
	if err := req.Respond([]byte(`{}`)); err != nil {
		g.share.running.Delete(o.ID)
		g.endLoan()
		return
	}
	go g.runLoan(ctx, &o)
}

// runLoan runs the handler on a copy and sends the settlement to its owner.
func (g *Group) runLoan(ctx context.Context, o *offer) {
	defer g.share.running.Delete(o.ID)
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
		actx, acancel := context.WithTimeout(rctx, shareTimeout)
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

// serveResult hands a lender's result to the waiting message.
func (g *Group) serveResult(req micro.Request) {
	var s settlement
	if err := json.Unmarshal(req.Data(), &s); err != nil || s.ID == "" {
		_ = req.Error("400", "invalid result", nil)
		return
	}
	v, ok := g.share.pending.Load(s.ID)
	if !ok {
		_ = req.Error("404", "no shared message "+s.ID+" waits", nil)
		return
	}
	select {
	case v.(chan settlement) <- s:
	default: // a duplicate delivery
	}
	_ = req.Respond([]byte(`{}`))
}

// startSharing lets other members' reservations in (loans run with a
// context derived from ctx) and starts the prober; it returns the function
// that stops both: it refuses new reservations, lets the loans finish for
// up to DrainTimeout, then cancels them and waits for them to return.
func (g *Group) startSharing(ctx context.Context) (stop func()) {
	if !g.shareOn.Load() {
		return func() {}
	}
	pctx, pcancel := context.WithCancel(ctx)
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		g.probe(pctx)
	}()
	g.share.mu.Lock()
	g.share.lendCtx, g.share.cancel = context.WithCancel(context.WithoutCancel(ctx))
	g.share.lending = true
	g.share.mu.Unlock()
	return func() {
		pcancel()
		<-probed
		g.share.mu.Lock()
		cancel := g.share.cancel
		g.share.lending = false
		g.share.mu.Unlock()
		defer func() {
			cancel()
			g.share.mu.Lock()
			g.share.lendCtx, g.share.cancel = nil, nil
			g.share.mu.Unlock()
		}()
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
}
