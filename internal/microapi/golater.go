package microapi

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/pkg/events/natsce"
)

// Work is an endpoint's work for one request answered later: its reply or
// its refusal. ctx is the service's run context (see Later) with the
// caller's trace; work sets its own deadline.
type Work func(ctx context.Context) (any, *Error)

// Then is a reply with something to do once it was sent (an announcement
// that must follow the answer). A Work returns it in place of its reply:
// Reply is answered, then After runs — not when the answer was dropped at
// shutdown. A panic in After is logged.
type Then struct {
	Reply any
	After func()
}

// Ticket is a request Later admitted: Go answers it. Use it once.
type Ticket struct {
	l        *Later
	endpoint string
	reply    string
	ctx      context.Context
	release  func()
	done     func(*Error)
}

// Go answers req later: Admit, then Ticket.Go.
func (l *Later) Go(req micro.Request, endpoint string, adm *Admission, key string, work Work) {
	if t, ok := l.Admit(req, endpoint, adm, key, nil); ok {
		t.Go(work)
	}
}

// Admit takes key's slot (a tenant's) in adm (nil: no bound) for req at
// endpoint. A refusal — key over its share (429), the replica full (503),
// the service stopped (503) — is answered at once through req, so micro
// counts it, with a Retry-After header; an admission refusal is also
// counted in recall_admission_rejected_total. shape, when not nil, may
// rewrite an admission refusal before it is sent (a problem document). The
// request's reply subject and headers are read before Admit returns: micro
// reuses the request once the handler returns.
func (l *Later) Admit(req micro.Request, endpoint string, adm *Admission, key string, shape func(*Error) *Error) (*Ticket, bool) {
	ctx := l.Context(nats.Header(req.Headers()))
	if !l.enter() {
		Answer(l.nc, l.log, req.Reply(), nil, &Error{Code: 503, Msg: "the service is stopping; retry shortly", RetryAfter: time.Second}, req)
		return nil, false
	}
	release, aerr := adm.Admit(key)
	if aerr != nil {
		l.leave()
		CountRejected(ctx, endpoint, key, aerr)
		if shape != nil {
			aerr = shape(aerr)
		}
		Answer(l.nc, l.log, req.Reply(), nil, aerr, req)
		return nil, false
	}
	return &Ticket{l: l, endpoint: endpoint, reply: req.Reply(), ctx: ctx, release: release, done: l.begin(endpoint)}, true
}

// Context is the context of a request with headers hdr: the run
// context's values and Later's cancellation (see Later), with the caller's
// trace. Go gives it to work; a handler uses it for what it does before
// (decoding, a span covering the whole request).
func (l *Later) Context(hdr nats.Header) context.Context { return natsce.Extract(l.base, hdr) }

// Go runs work in a goroutine and sends its answer on the reply subject
// (a panic answers 500). The slot is released and the answer counted
// before it goes out, so a client holding the answer finds it counted and
// its next request finds the slot free.
func (t *Ticket) Go(work Work) {
	go func() {
		defer t.l.leave()
		res, aerr := run(t.ctx, t.l.log, t.endpoint, work)
		t.release()
		var after func()
		if th, ok := res.(Then); ok {
			res, after = th.Reply, th.After
		}
		t.done(aerr)
		sent := t.l.send(func() { Answer(t.l.nc, t.l.log, t.reply, res, aerr, nil) })
		if sent && after != nil {
			t.after(after)
		}
	}()
}

// after runs a Then's After, logging a panic.
func (t *Ticket) after(f func()) {
	defer func() {
		if v := recover(); v != nil {
			t.l.log.ErrorContext(t.ctx, t.endpoint+" panicked after answering", "panic", v, "stack", string(debug.Stack()))
		}
	}()
	f()
}

// run calls work, turning a panic into a 500.
func run(ctx context.Context, log *slog.Logger, endpoint string, work Work) (res any, aerr *Error) {
	defer func() {
		if v := recover(); v != nil {
			log.ErrorContext(ctx, endpoint+" panicked", "panic", v, "stack", string(debug.Stack()))
			res, aerr = nil, Fail(500, "internal error (%s); see the service's log", endpoint)
		}
	}()
	return work(ctx)
}

// retryAfterHeader is the header a refusal's RetryAfter travels in (whole
// seconds, as HTTP's Retry-After).
const retryAfterHeader = "Retry-After"

func setRetryAfter(hdr nats.Header, d time.Duration) {
	if d > 0 {
		hdr.Set(retryAfterHeader, RetryAfter(d))
	}
}
