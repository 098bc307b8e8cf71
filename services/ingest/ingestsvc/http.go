package ingestsvc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/recallhq/recall/pkg/events"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Media types of POST /v1/events.
const (
	MediaStructured = event.ApplicationCloudEventsJSON      // application/cloudevents+json
	MediaBatch      = event.ApplicationCloudEventsBatchJSON // application/cloudevents-batch+json
)

// Limits bounds what one request may carry.
type Limits struct {
	MaxEventBytes  int
	MaxBatchEvents int
	MaxBodyBytes   int64
	// BodyTimeout bounds the time to read one request body (0: no bound).
	BodyTimeout time.Duration
	// adm admits request bodies and calls per tenant (nil: no bound).
	adm *Admission
}

// EventsHandler serves POST /v1/events: structured, binary and batch
// CloudEvents over HTTP (the CloudEvents SDK's HTTP binding decodes them).
type EventsHandler struct {
	in     *Ingester
	auth   *Auth
	limits Limits
}

// NewEventsHandler returns the handler of POST /v1/events.
func NewEventsHandler(in *Ingester, auth *Auth, limits Limits) *EventsHandler {
	return &EventsHandler{in: in, auth: auth, limits: limits}
}

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// ServeHTTP authenticates, decodes, validates and stores the request's
// events and answers once JetStream acknowledged every stored event.
//
// Memory is bounded by the limits, never by what the client announces: a
// body is read only once its tenant was admitted to a body lane
// (Admission: others get 429 or 503 with Retry-After before any byte is
// read), each body is read within
// Limits.BodyTimeout (408 after) up to Limits.MaxBodyBytes (413), and a batch
// is split while it arrives and rejected at its first element over
// Limits.MaxBatchEvents.
func (h *EventsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := h.in.tracer.Start(ctx, "POST /v1/events", trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	defer h.in.observe(ctx, "http", start)

	tenant, mode, ok := h.admit(ctx, w, r)
	if !ok {
		return
	}
	span.SetAttributes(attribute.String("recall.tenant", tenant))
	release, ok := h.limits.adm.admitBody(ctx, w, r, tenant, "POST /v1/events")
	if !ok {
		h.in.reject(ctx, "busy", 1)
		return
	}
	defer release()
	h.limits.setBodyDeadline(w)
	body := http.MaxBytesReader(w, r.Body, h.limits.MaxBodyBytes)

	var items []item
	var p *problemReason
	done := func(reuse bool) {}
	if mode == modeBatch {
		items, p = decodeBatchFrom(body, r.ContentLength, h.limits)
	} else {
		items, done, p = h.readSingle(ctx, r.Header, body)
	}
	reuse := true // false when a failed publish may still hold the body
	defer func() { done(reuse) }()
	if p != nil {
		h.in.reject(ctx, p.reason(), 1)
		writeProblem(w, p.Problem)
		return
	}
	span.SetAttributes(attribute.Int("recall.events", len(items)))
	results := h.in.submit(ctx, tenant, "", items).wait(ctx)
	for i := range results {
		if results[i].Status == http.StatusServiceUnavailable {
			reuse = false
		}
	}
	status, resp := summarize(results)
	if status == http.StatusAccepted {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", MediaProblem)
	}
	w.WriteHeader(status)
	_, _ = w.Write(mustJSON(resp))
}

// admit authenticates the request and checks its mode and announced size;
// when it cannot be served it has been answered and ok is false.
func (h *EventsHandler) admit(ctx context.Context, w http.ResponseWriter, r *http.Request) (tenant string, m mode, ok bool) {
	tenant, err := h.auth.Authenticate(r)
	if err != nil {
		h.in.reject(ctx, "unauthenticated", 1)
		w.Header().Set("WWW-Authenticate", `Bearer realm="recall"`)
		writeProblem(w, newProblem(ProblemUnauthenticated, http.StatusUnauthorized, err.Error()))
		return "", 0, false
	}
	m, p := requestMode(r.Header)
	if p == nil && r.ContentLength > h.limits.MaxBodyBytes {
		p = &problemReason{newProblem(ProblemTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is %d bytes, at most %d allowed", r.ContentLength, h.limits.MaxBodyBytes)), "body_too_large"}
	}
	if p != nil {
		h.in.reject(ctx, p.reason(), 1)
		writeProblem(w, p.Problem)
		return "", 0, false
	}
	return tenant, m, true
}

// readSingle reads a structured- or binary-mode body into a pooled buffer
// (grown only as bytes arrive) and decodes it. done returns the buffer to
// the pool when reuse is true (a failed publish may still hold the body).
func (h *EventsHandler) readSingle(ctx context.Context, hdr http.Header, body io.Reader) ([]item, func(bool), *problemReason) {
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	done := func(reuse bool) {
		if reuse && buf.Cap() <= 4<<20 {
			bodyPool.Put(buf)
		}
	}
	if _, err := buf.ReadFrom(body); err != nil {
		if p := readProblem(err); p != nil {
			return nil, done, p
		}
		return nil, done, invalidBody("reading request body: " + err.Error())
	}
	return []item{decodeSingle(ctx, hdr, buf.Bytes(), h.limits.MaxEventBytes)}, done, nil
}

// setBodyDeadline bounds the time left to read the request body.
func (l Limits) setBodyDeadline(w http.ResponseWriter) {
	if l.BodyTimeout > 0 {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(l.BodyTimeout))
	}
}

type mode int

const (
	modeStructured mode = iota
	modeBinary
	modeBatch
)

// mediaType is the lower-case media type of a Content-Type value, without
// parameters.
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// requestMode tells the CloudEvents mode of a request from its headers, or
// returns a 415 problem.
func requestMode(hdr http.Header) (mode, *problemReason) {
	mt := mediaType(hdr.Get("Content-Type"))
	switch {
	case mt == MediaStructured:
		return modeStructured, nil
	case mt == MediaBatch:
		return modeBatch, nil
	case hdr.Get("Ce-Specversion") != "":
		if mt != "" && mt != "application/json" && !strings.HasSuffix(mt, "+json") {
			return 0, &problemReason{newProblem(ProblemUnsupportedMedia, http.StatusUnsupportedMediaType,
				fmt.Sprintf("binary-mode event data must be JSON (Content-Type application/json), not %q", mt)), "unsupported_media_type"}
		}
		return modeBinary, nil
	}
	detail := fmt.Sprintf("Content-Type %q is not a CloudEvents mode: use %s (one event), %s (a JSON array of events), or binary mode (ce-specversion, ce-id, ... headers and Content-Type application/json)", mt, MediaStructured, MediaBatch)
	if mt == "" {
		detail = "missing Content-Type: use " + MediaStructured + ", " + MediaBatch + " or binary mode (ce-* headers)"
	}
	return 0, &problemReason{newProblem(ProblemUnsupportedMedia, http.StatusUnsupportedMediaType, detail), "unsupported_media_type"}
}

// problemReason is a request-level problem with its rejection reason.
type problemReason struct {
	*events.Problem
	why string
}

func (p *problemReason) reason() string { return p.why }

func writeProblem(w http.ResponseWriter, p *events.Problem) {
	w.Header().Set("Content-Type", MediaProblem)
	w.WriteHeader(p.Status)
	_, _ = w.Write(mustJSON(p))
}
