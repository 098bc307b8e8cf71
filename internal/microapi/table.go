package microapi

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/replyspace"
	"github.com/recallhq/recall/pkg/events"
)

// Mode says where an endpoint's work runs.
type Mode int

const (
	// Quick endpoints answer in micro's handler, under Endpoint.Timeout,
	// through the request (micro counts their errors). A quick endpoint's
	// work is one small bounded read: micro serves an endpoint's requests
	// one at a time, so every request of every tenant waits for it.
	Quick Mode = iota
	// AnswerLater endpoints only check and admit in micro's handler; the
	// work runs in a goroutine through the service's Later, so one
	// tenant's slow requests never hold up another tenant's.
	AnswerLater
)

// Request is one request to an endpoint: the tenant and the last token
// (a session, a user, an operation) of its subject, its body and headers.
// Value is what the endpoint's Check put there.
type Request struct {
	Subject, Tenant, Session string
	Data                     []byte
	Header                   nats.Header
	Value                    any
}

// Handler does an endpoint's work for one request: its reply or its
// refusal. ctx carries the service's run context and the caller's trace.
type Handler func(ctx context.Context, r Request) (any, *Error)

// Endpoint is one entry of a service's endpoint table.
type Endpoint struct {
	// Verb is the API verb: the endpoint's name and, unless Subject is
	// set, its subject events.APISubject(Verb, "*", "*").
	Verb    string
	Subject string
	// Usage is the last token a refusal of a malformed subject names
	// ("<session>" when empty).
	Usage string
	Mode  Mode
	// Timeout bounds a Quick endpoint's work (DefaultTimeout when 0).
	Timeout time.Duration
	// Admission, or Lane when the bound depends on the request, bounds an
	// AnswerLater endpoint's requests per tenant and in all (nil: none).
	Admission *Admission
	Lane      func(Request) *Admission
	// Shape, when set, rewrites an admission refusal before it is sent.
	Shape func(Request, *Error) *Error
	// Check, when set, runs in the handler before admission: a cheap
	// refusal (a malformed body) is answered at once, through micro.
	Check func(ctx context.Context, r *Request) *Error
	// Handle is the endpoint's work. An AnswerLater endpoint may set Start
	// instead: it runs in the handler after admission, in arrival order,
	// and returns the work to answer later.
	Handle Handler
	Start  func(ctx context.Context, r Request) (Work, *Error)
}

// DefaultTimeout bounds a Quick endpoint's work when its Timeout is 0.
const DefaultTimeout = 10 * time.Second

// Service is a micro service's endpoint table.
type Service struct {
	Name, Description string
	Endpoints         []Endpoint
}

// Serve adds spec's micro service on later's connection and serves its
// endpoints: every request passes the reply-space guard (internal/
// replyspace), its subject is split into tenant and session (400 when it
// is not recall.api.<verb>.<tenant>.<session>), and every answer goes out
// through Answer or later, with an Error's code. later's numbers are the
// service's stats; the caller stops the service, then later (the
// lifecycle does both). On error nothing is left serving.
func Serve(later *Later, spec Service) (micro.Service, error) {
	svc, err := micro.AddService(later.nc, micro.Config{Name: spec.Name, Version: "1.0.0",
		Description: spec.Description, StatsHandler: later.Stats})
	if err != nil {
		return nil, fmt.Errorf("adding the micro service %s: %w", spec.Name, err)
	}
	for _, e := range spec.Endpoints {
		subject := e.Subject
		if subject == "" {
			subject = events.APISubject(e.Verb, "*", "*")
		}
		h := replyspace.Guard(later.log, endpoint{e: e, l: later})
		if err := svc.AddEndpoint(e.Verb, h, micro.WithEndpointSubject(subject)); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("adding the endpoint %s of %s: %w", e.Verb, spec.Name, err)
		}
	}
	return svc, nil
}

// endpoint is the micro handler of one table entry.
type endpoint struct {
	e Endpoint
	l *Later
}

func (h endpoint) Handle(req micro.Request) {
	e, l := h.e, h.l
	hdr := nats.Header(req.Headers())
	ctx := l.Context(hdr)
	tenant, session, ok := events.SplitSessionSubject(req.Subject())
	if !ok {
		usage := e.Usage
		if usage == "" {
			usage = "<session>"
		}
		l.answerNow(req, Fail(400, "subject must be %s with ids of A-Z a-z 0-9 - _", events.APISubject(e.Verb, "<tenant>", usage)))
		return
	}
	r := Request{Subject: req.Subject(), Tenant: tenant, Session: session, Data: req.Data(), Header: hdr}
	if e.Check != nil {
		if aerr := e.Check(ctx, &r); aerr != nil {
			l.answerNow(req, aerr)
			return
		}
	}
	if e.Mode == Quick {
		qctx, cancel := context.WithTimeout(ctx, orDefault(e.Timeout, DefaultTimeout))
		defer cancel()
		res, aerr := run(qctx, l.log, e.Verb, func(ctx context.Context) (any, *Error) { return e.Handle(ctx, r) })
		Answer(l.nc, l.log, req.Reply(), res, aerr, req)
		return
	}
	adm := e.Admission
	if e.Lane != nil {
		adm = e.Lane(r)
	}
	var shape func(*Error) *Error
	if e.Shape != nil {
		shape = func(aerr *Error) *Error { return e.Shape(r, aerr) }
	}
	t, ok := l.Admit(req, e.Verb, adm, tenant, shape)
	if !ok {
		return
	}
	if e.Start == nil {
		t.Go(func(ctx context.Context) (any, *Error) { return e.Handle(ctx, r) })
		return
	}
	work, aerr := e.Start(t.ctx, r)
	if aerr != nil {
		t.Go(func(context.Context) (any, *Error) { return nil, aerr })
		return
	}
	t.Go(work)
}

// answerNow answers a refusal in the handler, through req.
func (l *Later) answerNow(req micro.Request, aerr *Error) {
	Answer(l.nc, l.log, req.Reply(), nil, aerr, req)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
