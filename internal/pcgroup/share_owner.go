package pcgroup

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
	"github.com/recallhq/recall/pkg/retry"
)

// slot is how acquire ended.
type slot int

const (
	slotLocal   slot = iota // a local slot is taken: run the handler here
	slotShared              // another member ran it; m is settled
	slotStopped             // stopping before either
)

// acquire waits for one of this member's slots; with sharing, a slot
// another member reserved serves too. It gives up (slotStopped) when ctx
// ends or stop is closed (a nil stop: only ctx).
func (g *Group) acquire(ctx context.Context, r *runner, m *Msg, log *slog.Logger, stop <-chan struct{}) slot {
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
		case <-stop:
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
	backoff := probeBackoff.Backoff()
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
			retry.Pause(ctx.Done(), backoff.Next())
			continue
		}
		backoff.Reset()
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
