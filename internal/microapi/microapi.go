// Package microapi serves Recall's request-reply endpoints: a service
// declares its endpoint table (Service: verb, Quick or AnswerLater,
// admission, handler) and Serve runs it, so every answer goes out one way —
// JSON replies (chunked when large), refusals as micro errors with an
// HTTP-like code (Error) and an optional RFC 9457 problem document — and
// no request works on context.Background(). DecodeBody decodes optional
// JSON request bodies strictly.
//
// Quick endpoints answer at once through their micro.Request, so micro's
// stats count their errors. Endpoints that answer from a goroutine
// (a model call, a wait) go through Later, the one helper for them:
// admission per tenant, the service's run context with the caller's trace,
// panic recovery, stats and a bounded wait at shutdown. Later answers on
// the reply subject — micro reads its error state when the handler
// returns, so a later answer through the request would race with it.
package microapi

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/pkg/chunked"
)

// Error is a refusal: a micro error code (an HTTP status) and, for some, a
// problem document. RetryAfter, when set, is sent in a Retry-After header
// (whole seconds) beside the error code, for the HTTP edge to pass on.
type Error struct {
	Code       int
	Msg        string
	Problem    any
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Msg }

// Fail returns an Error with a formatted message.
func Fail(code int, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Answer replies on reply with res, or with aerr when it is not nil. req,
// when set, is the handler's request (errors go through micro).
func Answer(nc *nats.Conn, log *slog.Logger, reply string, res any, aerr *Error, req micro.Request) {
	if reply == "" {
		return
	}
	if aerr != nil {
		hdr := nats.Header{}
		var body []byte
		if aerr.Problem != nil {
			body, _ = json.Marshal(aerr.Problem)
			hdr.Set("Content-Type", "application/problem+json")
		}
		setRetryAfter(hdr, aerr.RetryAfter)
		if req != nil {
			_ = req.Error(strconv.Itoa(aerr.Code), aerr.Msg, body, micro.WithHeaders(micro.Headers(hdr)))
			return
		}
		hdr.Set(micro.ErrorCodeHeader, strconv.Itoa(aerr.Code))
		hdr.Set(micro.ErrorHeader, aerr.Msg)
		_ = nc.PublishMsg(&nats.Msg{Subject: reply, Header: hdr, Data: body})
		return
	}
	b, ok := res.(JSON)
	if !ok {
		var err error
		if b, err = json.Marshal(res); err != nil {
			Answer(nc, log, reply, nil, Fail(500, "encoding the reply: %v", err), req)
			return
		}
	}
	if err := chunked.Respond(nc, reply, nats.Header{"Content-Type": []string{"application/json"}}, b); err != nil {
		log.Warn("answering failed", "err", err)
	}
}

// JSON is a reply already encoded as JSON: Answer sends it as it is.
type JSON []byte

// DecodeBody decodes an optional JSON body strictly (unknown fields are
// errors); an empty body leaves v as it is.
func DecodeBody(body []byte, v any) *Error {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Fail(400, "decoding the request: %v", err)
	}
	return nil
}
