package ingestsvc

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// ServiceName is the name of the ingest micro service.
const ServiceName = "recall-ingest"

// IngestEndpointSubject is the subject the NATS ingest endpoint serves:
// recall.api.ingest.<tenant>.<session>.
const IngestEndpointSubject = events.SubjectAPIRoot + "." + events.VerbIngest + ".*.*"

// NATSHandler serves the NATS ingest endpoint. Over NATS the tenant and the
// session come from the request subject; per-tenant NATS permissions decide
// who may publish where.
//
// Requests are decoded, validated and published in arrival order on the
// endpoint's subscription; acknowledgements are awaited and replies sent
// concurrently through a microapi.Later, so a client may pipeline
// requests. Stopping the Later waits until every accepted request was
// answered.
type NATSHandler struct {
	later  *microapi.Later // answers, counts and awaits the replies
	in     *Ingester
	limits Limits
	// adm bounds the requests awaiting acknowledgements, in all and (see
	// tenantShare) per tenant.
	adm         *microapi.Admission
	maxInFlight int
	// uploads holds the chunks of chunked requests (nil: refused); each
	// store or read is bounded by uploadTimeout.
	uploads       UploadStore
	uploadTimeout time.Duration
}

// NewNATSHandler returns the handler of the NATS ingest endpoint, answering
// through later (on the connection of the micro service); at most
// maxInFlight requests await their acknowledgements at once, more are
// refused with a 503 before anything of them is published.
func NewNATSHandler(later *microapi.Later, in *Ingester, limits Limits, maxInFlight int) *NATSHandler {
	if maxInFlight <= 0 {
		maxInFlight = 1024
	}
	return &NATSHandler{later: later, in: in, limits: limits, adm: microapi.NewAdmission(0, maxInFlight, time.Second),
		maxInFlight: maxInFlight}
}

// tenantShare bounds one tenant's requests awaiting acknowledgements to n
// (429 with Retry-After beyond); call it before the endpoint serves.
func (h *NATSHandler) tenantShare(n int) {
	h.adm = microapi.NewAdmission(n, h.maxInFlight, time.Second)
}

// endpoint is the NATS ingest endpoint's entry of the endpoint table. The
// body is one structured CloudEvent (a JSON object), a batch (a JSON array
// of them), or a binary-mode event (ce-* headers, JSON body). The reply is
// a Response, or a micro error whose code is the HTTP status the edge
// would return (400, 403, 413, 207, 429, 503) with a Problem as data.
//
// A body that does not decode is refused at once. A slot is taken before
// anything is published: when every slot awaits acknowledgements
// (JetStream is slow or down), the request is refused at once with a 503
// and nothing of it is stored, rather than queued in the subscription's
// buffer, where it would wait unseen and finally be dropped as a slow
// consumer's message. The events are published in arrival order, in the
// handler; their acknowledgements are awaited later.
func (h *NATSHandler) endpoint() microapi.Endpoint {
	return microapi.Endpoint{Verb: events.VerbIngest, Subject: IngestEndpointSubject, Mode: microapi.AnswerLater,
		Admission: h.adm,
		Check: func(ctx context.Context, r *microapi.Request) *microapi.Error {
			if r.Header.Get(chunked.HeaderUpload) != "" {
				if done, aerr := h.upload(ctx, r); done || aerr != nil {
					return aerr
				}
			}
			items, p := h.decode(r.Header, r.Data)
			if p != nil {
				h.in.reject(ctx, p.reason(), 1)
				return problemError(p.Problem)
			}
			r.Value = items
			return nil
		},
		Shape: func(r microapi.Request, aerr *microapi.Error) *microapi.Error {
			items, _ := r.Value.([]item) // none for a chunk
			return h.refusal(h.later.Context(r.Header), aerr, len(items))
		},
		Start: h.start,
	}
}

// start publishes a request's events and returns the wait for their
// acknowledgements.
func (h *NATSHandler) start(ctx context.Context, r microapi.Request) (microapi.Work, *microapi.Error) {
	if part, ok := r.Value.(uploadPart); ok {
		return h.storePart(part), nil
	}
	start := time.Now()
	ctx, span := h.in.tracer.Start(ctx, "ingest "+events.SubjectAPIRoot+"."+events.VerbIngest, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("recall.tenant", r.Tenant), attribute.String("recall.session", r.Session)))
	pend := h.in.submit(ctx, r.Tenant, r.Session, r.Value.([]item))
	return func(context.Context) (any, *microapi.Error) {
		defer span.End()
		defer h.in.observe(ctx, "nats", start)
		status, body := summarize(pend.wait(ctx))
		if status != http.StatusAccepted {
			return nil, problemError(body.(*events.Problem))
		}
		return body, nil
	}, nil
}

// problemError is the micro error of p.
func problemError(p *events.Problem) *microapi.Error {
	return &microapi.Error{Code: p.Status, Msg: p.Detail, Problem: p}
}

// refusal is the answer to a request admission refused, nothing of it
// stored: 429 when the tenant is over its share, 503 when every slot
// awaits acknowledgements, both with Retry-After.
func (h *NATSHandler) refusal(ctx context.Context, aerr *microapi.Error, n int) *microapi.Error {
	h.in.reject(ctx, "busy", n)
	p := newProblem(ProblemTooManyRequests, aerr.Code, aerr.Msg)
	if aerr.Code == http.StatusServiceUnavailable {
		p = newProblem(ProblemUnavailable, aerr.Code,
			fmt.Sprintf("ingest busy: %d requests are awaiting their acknowledgements; nothing of this request was stored, retry shortly", h.maxInFlight))
	}
	return &microapi.Error{Code: p.Status, Msg: p.Detail, Problem: p, RetryAfter: aerr.RetryAfter}
}

func (h *NATSHandler) decode(hdr nats.Header, body []byte) ([]item, *problemReason) {
	if isBinary(hdr) {
		size := len(body)
		for k, vs := range hdr {
			if len(vs) > 0 {
				size += len(k) + len(vs[0])
			}
		}
		if size > h.limits.MaxEventBytes {
			return []item{{id: hdr.Get("ce-id"), err: errTooLarge{size, h.limits.MaxEventBytes}}}, nil
		}
		if err := memberError(body, "data", events.MaxDepth); err != nil {
			return []item{{id: hdr.Get("ce-id"), err: err}}, nil
		}
		e, err := natsce.Decode(hdr, body)
		if err != nil {
			return []item{{id: hdr.Get("ce-id"), err: decodeError(err)}}, nil
		}
		return []item{{ev: e}}, nil
	}
	trimmed := bytes.TrimSpace(body)
	switch {
	case len(trimmed) > 0 && trimmed[0] == '[':
		return decodeBatch(trimmed, h.limits)
	case len(trimmed) > 0 && trimmed[0] == '{':
		return []item{decodeStructured(trimmed, h.limits.MaxEventBytes)}, nil
	}
	return nil, &problemReason{newProblem(ProblemInvalidBody, http.StatusBadRequest,
		"body must be a structured CloudEvent (JSON object), a batch (JSON array), or a binary-mode event (ce-* headers)"), "invalid_body"}
}

// isBinary reports whether hdr carries a binary-mode CloudEvent (a
// ce-specversion header, in any spelling).
func isBinary(hdr nats.Header) bool {
	for k, vs := range hdr {
		if len(vs) > 0 && len(k) == len("ce-specversion") && strings.EqualFold(k, "ce-specversion") {
			return true
		}
	}
	return false
}
