package ingestsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	jsoniter "github.com/json-iterator/go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/pkg/events"
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
func (h *EventsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := h.in.tracer.Start(ctx, "POST /v1/events", trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	defer h.in.observe(ctx, "http", start)

	tenant, err := h.auth.Authenticate(r)
	if err != nil {
		h.in.reject(ctx, "unauthenticated", 1)
		w.Header().Set("WWW-Authenticate", `Bearer realm="recall"`)
		writeProblem(w, newProblem(ProblemUnauthenticated, http.StatusUnauthorized, err.Error()))
		return
	}
	span.SetAttributes(attribute.String("recall.tenant", tenant))

	mode, p := requestMode(r.Header)
	if p != nil {
		h.in.reject(ctx, p.reason(), 1)
		writeProblem(w, p.Problem)
		return
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	reuse := true // false when a failed publish may still hold the body
	defer func() {
		if reuse && buf.Cap() <= 4<<20 {
			bodyPool.Put(buf)
		}
	}()
	if r.ContentLength > h.limits.MaxBodyBytes {
		h.in.reject(ctx, "body_too_large", 1)
		writeProblem(w, newProblem(ProblemTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is %d bytes, at most %d allowed", r.ContentLength, h.limits.MaxBodyBytes)))
		return
	}
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, h.limits.MaxBodyBytes)); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			h.in.reject(ctx, "body_too_large", 1)
			writeProblem(w, newProblem(ProblemTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is over %d bytes", h.limits.MaxBodyBytes)))
			return
		}
		h.in.reject(ctx, "invalid_body", 1)
		writeProblem(w, newProblem(ProblemInvalidBody, http.StatusBadRequest, "reading request body: "+err.Error()))
		return
	}
	body := buf.Bytes()

	var items []item
	switch mode {
	case modeBatch:
		items, p = decodeBatch(body, h.limits)
		if p != nil {
			h.in.reject(ctx, p.reason(), 1)
			writeProblem(w, p.Problem)
			return
		}
	default:
		items = []item{decodeSingle(ctx, r.Header, body, h.limits.MaxEventBytes)}
	}
	span.SetAttributes(attribute.Int("recall.events", len(items)))
	results := h.in.submit(ctx, tenant, "", items).wait(ctx)
	status, resp := summarize(results)
	for i := range results {
		if results[i].Status == http.StatusServiceUnavailable {
			reuse = false
		}
	}
	if status == http.StatusAccepted {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", MediaProblem)
	}
	w.WriteHeader(status)
	_, _ = w.Write(mustJSON(resp))
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
	*Problem
	why string
}

func (p *problemReason) reason() string { return p.why }

// decodeSingle decodes a structured- or binary-mode request body with the
// SDK's HTTP binding.
func decodeSingle(ctx context.Context, hdr http.Header, body []byte, maxEvent int) item {
	size := len(body)
	for k, vs := range hdr {
		if len(k) > 3 && strings.EqualFold(k[:3], "ce-") && len(vs) > 0 {
			size += len(k) + len(vs[0])
		}
	}
	id := hdr.Get("Ce-Id")
	if size > maxEvent {
		if id == "" {
			id = probeID(body)
		}
		return item{id: id, err: errTooLarge{size, maxEvent}}
	}
	msg := cehttp.NewMessage(hdr, io.NopCloser(bytes.NewReader(body)))
	e, err := binding.ToEvent(ctx, msg)
	if err != nil {
		if msg.ReadEncoding() == binding.EncodingStructured {
			return item{id: probeID(body), err: diagnose(body, err)}
		}
		return item{id: id, err: decodeError(err)}
	}
	return item{ev: *e}
}

// decodeBatch splits a batch body into events, each decoded on its own so
// one malformed event does not hide the others.
func decodeBatch(body []byte, l Limits) ([]item, *problemReason) {
	raws, err := splitArray(body)
	if err != nil {
		var generic any
		if t := bytes.TrimSpace(body); len(t) > 0 && t[0] != '[' && json.Unmarshal(t, &generic) == nil {
			return nil, &problemReason{newProblem(ProblemInvalidBody, http.StatusBadRequest, "batch body must be a JSON array of CloudEvents"), "invalid_body"}
		}
		if serr := json.Unmarshal(body, &generic); serr != nil {
			err = serr // the standard library words syntax errors better
		}
		return nil, &problemReason{newProblem(ProblemInvalidBody, http.StatusBadRequest, "batch body is not valid JSON: "+jsonErr(err)), "invalid_body"}
	}
	if len(raws) == 0 {
		return nil, &problemReason{newProblem(ProblemInvalidBody, http.StatusBadRequest, "empty batch: send at least one event"), "invalid_body"}
	}
	if len(raws) > l.MaxBatchEvents {
		return nil, &problemReason{newProblem(ProblemTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("batch has %d events, at most %d allowed", len(raws), l.MaxBatchEvents)), "batch_too_large"}
	}
	items := make([]item, len(raws))
	for i, raw := range raws {
		items[i] = decodeStructured(raw, l.MaxEventBytes)
	}
	return items, nil
}

// splitArray returns the elements of a JSON array in one pass. Elements are
// only delimited here; decoding each one validates it.
func splitArray(body []byte) ([][]byte, error) {
	it := jsoniter.ConfigFastest.BorrowIterator(body)
	defer jsoniter.ConfigFastest.ReturnIterator(it)
	if it.WhatIsNext() != jsoniter.ArrayValue {
		return nil, errors.New("not an array")
	}
	raws := make([][]byte, 0, 128)
	for it.ReadArray() {
		raw := it.SkipAndReturnBytes()
		if it.Error != nil {
			return nil, it.Error
		}
		raws = append(raws, raw)
	}
	if it.Error != nil {
		return nil, it.Error
	}
	if it.WhatIsNext() != jsoniter.InvalidValue || (it.Error != nil && !errors.Is(it.Error, io.EOF)) {
		return nil, errors.New("data after the array")
	}
	return raws, nil
}

// decodeStructured decodes one structured-mode event (JSON) with the SDK's
// event decoder.
func decodeStructured(raw []byte, maxEvent int) item {
	if len(raw) > maxEvent {
		return item{id: probeID(raw), err: errTooLarge{len(raw), maxEvent}}
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return item{err: &events.FieldError{Field: "event", Reason: "not a CloudEvent: expected a JSON object"}}
	}
	var it item
	if err := it.ev.UnmarshalJSON(raw); err != nil {
		return item{id: probeID(raw), err: diagnose(raw, err)}
	}
	return it
}

// decodeError describes an SDK decoding failure as a field error.
func decodeError(err error) error {
	return &events.FieldError{Field: "event", Reason: "not a valid CloudEvent: " + err.Error()}
}

// diagnose explains why the SDK could not decode a structured event, naming
// the field when it can: the SDK's errors rarely do.
func diagnose(raw []byte, sdkErr error) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return &events.FieldError{Field: "event", Reason: "invalid JSON: " + jsonErr(err)}
	}
	for _, name := range []string{"specversion", "id", "source", "type", "subject", "datacontenttype", "dataschema", "time", "data", "data_base64"} {
		v, ok := members[name]
		if !ok {
			continue
		}
		if !utf8.Valid(v) {
			return &events.FieldError{Field: name, Reason: "not valid UTF-8"}
		}
		if name == "data" {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			return &events.FieldError{Field: name, Reason: "must be a JSON string"}
		}
		switch name {
		case "specversion", "id", "source", "type":
			if s == "" {
				return &events.FieldError{Field: name, Reason: "required"}
			}
		}
		switch name {
		case "source", "dataschema":
			if _, err := url.Parse(s); err != nil || s == "" {
				return &events.FieldError{Field: name, Reason: fmt.Sprintf("%q is not a URI reference", s)}
			}
		case "time":
			if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
				return &events.FieldError{Field: name, Reason: fmt.Sprintf("%q is not an RFC 3339 timestamp", s)}
			}
		}
	}
	for name, v := range members {
		if !utf8.Valid(v) {
			return &events.FieldError{Field: name, Reason: "not valid UTF-8"}
		}
	}
	return decodeError(sdkErr)
}

// probeID reads the "id" member of a JSON object, for error results.
func probeID(raw []byte) string {
	var p struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(p.ID, &s) != nil {
		return ""
	}
	return s
}

func jsonErr(err error) string { return strings.TrimPrefix(err.Error(), "json: ") }

func writeProblem(w http.ResponseWriter, p *Problem) {
	w.Header().Set("Content-Type", MediaProblem)
	w.WriteHeader(p.Status)
	_, _ = w.Write(mustJSON(p))
}
