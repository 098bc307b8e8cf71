package pcgroup

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
	"github.com/recallhq/recall/pkg/retry"
)

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
// The delivery outlives a cancelled loan (the owner waits for it), bounded
// by resultDeadline.
func (g *Group) sendResult(ctx context.Context, o *offer, s settlement) {
	body, _ := json.Marshal(s)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resultDeadline)
	defer cancel()
	log := g.log.With("member", g.cfg.Member, "owner", o.From, "subject", o.Subject)
	var last error
	err := resultRetry.Do(rctx, nil, "delivering a shared result", func(actx context.Context) error {
		reply, err := g.js.Conn().RequestWithContext(actx, g.resultSubject(o.From), body)
		switch {
		case err == nil && reply.Header.Get(micro.ErrorCodeHeader) != "":
			log.DebugContext(rctx, "owner no longer waits for the shared result", "err", reply.Header.Get(micro.ErrorHeader))
			return nil
		case errors.Is(err, nats.ErrNoResponders):
			log.DebugContext(rctx, "owner of the shared message is gone")
			return nil
		}
		last = err
		return err
	})
	if err != nil {
		log.WarnContext(rctx, "could not deliver the result of a shared message; the owner redelivers it", "err", last)
	}
}

// resultRetry: a result is sent again after 50 ms, doubling up to 1 s,
// each request bounded by shareTimeout.
var resultRetry = retry.Policy{First: 50 * time.Millisecond, Max: time.Second, Attempt: shareTimeout}
