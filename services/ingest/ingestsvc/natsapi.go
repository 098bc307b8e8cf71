package ingestsvc

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/microapi"
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

// Handle implements micro.Handler. The body is one structured CloudEvent
// (a JSON object), a batch (a JSON array of them), or a binary-mode event
// (ce-* headers, JSON body). The reply is a Response, or a micro error whose
// code is the HTTP status the edge would return (400, 403, 413, 207, 503)
// with a Problem as data.
func (h *NATSHandler) Handle(req micro.Request) {
	start := time.Now()
	hdr := nats.Header(req.Headers())
	ctx, span := h.in.tracer.Start(h.later.Context(hdr), "ingest "+events.SubjectAPIRoot+"."+events.VerbIngest, trace.WithSpanKind(trace.SpanKindServer))
	tenant, session, ok := events.SplitSessionSubject(req.Subject())
	if !ok {
		h.in.reject(ctx, "invalid_body", 1)
		respondProblem(req, newProblem(ProblemInvalidBody, http.StatusBadRequest,
			fmt.Sprintf("subject %q must be %s.<tenant>.<session> with ids of A-Z a-z 0-9 - _", req.Subject(), events.SubjectAPIRoot+"."+events.VerbIngest)))
		span.End()
		return
	}
	span.SetAttributes(attribute.String("recall.tenant", tenant), attribute.String("recall.session", session))
	items, p := h.decode(hdr, req.Data())
	if p != nil {
		h.in.reject(ctx, p.reason(), 1)
		respondProblem(req, p.Problem)
		span.End()
		return
	}
	// A slot is taken before anything is published: when every slot awaits
	// acknowledgements (JetStream is slow or down), the request is refused
	// at once with a 503 and nothing of it is stored, rather than queued in
	// the subscription's buffer, where it would wait unseen and finally be
	// dropped as a slow consumer's message.
	t, ok := h.later.Admit(req, events.VerbIngest, h.adm, tenant, func(aerr *microapi.Error) *microapi.Error {
		return h.refusal(ctx, aerr, len(items))
	})
	if !ok {
		span.End()
		return
	}
	pend := h.in.submit(ctx, tenant, session, items)
	t.Go(func(context.Context) (any, *microapi.Error) {
		defer span.End()
		defer h.in.observe(ctx, "nats", start)
		status, body := summarize(pend.wait(ctx))
		if status != http.StatusAccepted {
			p := body.(*events.Problem)
			return nil, &microapi.Error{Code: p.Status, Msg: p.Detail, Problem: p}
		}
		return body, nil
	})
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

func respondProblem(req micro.Request, p *events.Problem) {
	_ = req.Error(strconv.Itoa(p.Status), p.Detail, mustJSON(p), micro.WithHeaders(micro.Headers{"Content-Type": []string{MediaProblem}}))
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
