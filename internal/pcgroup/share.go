package pcgroup

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/recallhq/recall/pkg/retry"
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
//     100 ms (probeBackoff).
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
//
// The owner's side (waiting, reserving, offering, applying results) is in
// share_owner.go, the lender's (reservations, loans, results sent back) in
// share_lend.go.

// Sharing limits.
const (
	// shareTimeout bounds one sharing round trip.
	shareTimeout = 2 * time.Second
	// reserveTTL is how long a lender keeps a reserved slot for the message
	// that has not come.
	reserveTTL = 2 * time.Second
	// grantWait is how long a reservation waits for a waiting message
	// before it is given back.
	grantWait = 100 * time.Millisecond
	// resultDeadline bounds the lender's delivery of a result.
	resultDeadline = 15 * time.Second
)

// probeBackoff: after a refused reservation the prober waits 5 ms,
// doubling up to 100 ms (with jitter).
var probeBackoff = retry.Policy{First: 5 * time.Millisecond, Max: 100 * time.Millisecond, Jitter: true}

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
