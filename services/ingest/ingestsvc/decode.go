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
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

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
	if msg.ReadEncoding() == binding.EncodingStructured {
		if err := memberError(body, "event", events.MaxDepth+1); err != nil {
			return item{id: probeID(body), err: err}
		}
	} else {
		if err := memberError(body, "data", events.MaxDepth); err != nil {
			return item{id: id, err: err}
		}
		decoded, err := decodeAttributeHeaders(hdr)
		if err != nil {
			return item{id: id, err: err}
		}
		msg = cehttp.NewMessage(decoded, io.NopCloser(bytes.NewReader(body)))
	}
	e, err := binding.ToEvent(ctx, msg)
	if err != nil {
		if msg.ReadEncoding() == binding.EncodingStructured {
			return item{id: probeID(body), err: diagnose(body, err)}
		}
		return item{id: id, err: decodeError(err)}
	}
	return item{ev: *e}
}

// decodeAttributeHeaders returns hdr with every ce-* value percent-decoded
// (CloudEvents HTTP binding, 3.1.3.2): "t%C3%BF" is the source "tÿ". A bad
// escape or a value that is not UTF-8 once decoded is a field error.
func decodeAttributeHeaders(hdr http.Header) (http.Header, error) {
	out := make(http.Header, len(hdr))
	for k, vs := range hdr {
		if len(k) <= 3 || !strings.EqualFold(k[:3], "ce-") || len(vs) == 0 {
			out[k] = vs
			continue
		}
		attr := strings.ToLower(k[3:])
		v, err := natsce.DecodeValue(vs[0])
		if err != nil {
			return nil, &events.FieldError{Field: attr, Reason: "header ce-" + attr + ": a '%' must start a percent-encoded byte (%XX)"}
		}
		if !utf8.ValidString(v) {
			return nil, &events.FieldError{Field: attr, Reason: "header ce-" + attr + ": not valid UTF-8 once percent-decoded"}
		}
		out[k] = []string{v}
	}
	return out, nil
}

// decodeBatch splits a batch body into events, each decoded on its own so
// one malformed event does not hide the others.
func decodeBatch(body []byte, l Limits) ([]item, *problemReason) {
	raws, ok := quickSplit(body, l.MaxBatchEvents)
	if !ok {
		return strictBatch(body, l)
	}
	items := decodeItems(raws, l)
	for _, it := range items {
		// quickSplit does not validate: an event that did not decode may
		// be invalid JSON, which rejects the whole batch as before.
		if it.err != nil && !json.Valid(body) {
			return strictBatch(body, l)
		}
	}
	return items, nil
}

// decodeBatchFrom reads a batch body of size bytes (-1: unknown; r bounds
// it to l.MaxBodyBytes) and decodes it. Read errors (body too large, read
// deadline) become problems.
func decodeBatchFrom(r io.Reader, size int64, l Limits) ([]item, *problemReason) {
	// One buffer of the announced size (growing one would copy it several
	// times), but never more than preallocMax on the client's word: a body
	// announced large and sent slowly must not hold memory it did not send.
	// Once that much arrived, the buffer grows once to the announced size
	// (doubling would hold up to three times the body while it copies).
	buf := bytes.NewBuffer(make([]byte, 0, max(0, min(size, l.MaxBodyBytes, preallocMax))+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(r, preallocMax)); err != nil {
		return nil, batchReadProblem(err)
	}
	if want := min(size, l.MaxBodyBytes); want > int64(buf.Len()) {
		buf.Grow(int(want) - buf.Len() + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, batchReadProblem(err)
	}
	return decodeBatch(buf.Bytes(), l)
}

// preallocMax bounds the buffer allocated for a batch body before it
// arrives.
const preallocMax = 256 << 10

// strictBatch splits body with encoding/json, whose errors name what is
// wrong with the array, and decodes its events.
func strictBatch(body []byte, l Limits) ([]item, *problemReason) {
	raws, p := splitBatch(bytes.NewReader(body), l.MaxBatchEvents)
	if p != nil {
		return nil, p
	}
	return decodeItems(raws, l), nil
}

func decodeItems(raws []json.RawMessage, l Limits) []item {
	items := make([]item, len(raws))
	for i, raw := range raws {
		items[i] = decodeStructured(raw, l.MaxEventBytes)
	}
	return items
}

// splitBatch returns the elements of the JSON array read from r, token by
// token, with at most max elements.
func splitBatch(r io.Reader, max int) ([]json.RawMessage, *problemReason) {
	dec := json.NewDecoder(r)
	tok, err := dec.Token()
	if err != nil {
		return nil, batchReadProblem(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, invalidBody("batch body must be a JSON array of CloudEvents")
	}
	var raws []json.RawMessage
	for dec.More() {
		if len(raws) == max {
			return nil, &problemReason{newProblem(ProblemTooLarge, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("batch has more than %d events, at most %d allowed", max, max)), "batch_too_large"}
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, batchReadProblem(err)
		}
		raws = append(raws, raw)
	}
	if _, err := dec.Token(); err != nil { // the closing bracket
		return nil, batchReadProblem(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if p := readProblem(err); p != nil {
			return nil, p
		}
		return nil, invalidBody(fmt.Sprintf("batch body has data after the array (at byte %d): send one JSON array", dec.InputOffset()))
	}
	if len(raws) == 0 {
		return nil, invalidBody("empty batch: send at least one event")
	}
	return raws, nil
}

// batchReadProblem describes a failure to read or parse a batch body.
func batchReadProblem(err error) *problemReason {
	if p := readProblem(err); p != nil {
		return p
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalidBody("batch body is not valid JSON: unexpected end of JSON input")
	}
	return invalidBody("batch body is not valid JSON: " + jsonErr(err))
}

// readProblem is the problem of an error reading a request body (too
// large, too slow), or nil for any other error.
func readProblem(err error) *problemReason {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return &problemReason{newProblem(ProblemTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is over %d bytes", mbe.Limit)), "body_too_large"}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &problemReason{newProblem(ProblemTimeout, http.StatusRequestTimeout, "request body did not arrive in time"), "body_timeout"}
	}
	return nil
}

func invalidBody(detail string) *problemReason {
	return &problemReason{newProblem(ProblemInvalidBody, http.StatusBadRequest, detail), "invalid_body"}
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
	if err := memberError(raw, "event", events.MaxDepth+1); err != nil {
		return item{id: probeID(raw), err: err}
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
