// Package natsce is Recall's CloudEvents binding for NATS messages, written
// because the sdk's NATS protocol module is not available to us.
//
// Binary mode (what Recall publishes): every context attribute travels in a
// "ce-<name>" header whose value is percent-encoded as the CloudEvents HTTP
// and NATS bindings require, the data is the message body, and
// "Content-Type" is the datacontenttype. Consumers read attributes without
// decoding bodies.
//
// Structured mode (accepted on input): Content-Type
// "application/cloudevents+json" and the whole event as the JSON body.
//
// Header names are matched case-insensitively on input.
package natsce

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
)

// Header names and media types.
const (
	HeaderPrefix      = "ce-"
	HeaderContentType = "Content-Type"
	MediaStructured   = "application/cloudevents+json"
	MediaBatch        = "application/cloudevents-batch+json"
)

// ErrNotCloudEvent is returned by FromMsg for a message that carries neither
// binary-mode headers nor a structured body.
var ErrNotCloudEvent = errors.New("message is not a CloudEvent (no ce-specversion header and no application/cloudevents+json content type)")

// NewMsg encodes e in binary mode as a message on subject. The returned
// message has a fresh header the caller may extend (Nats-Msg-Id, trace).
func NewMsg(subject string, e *event.Event) *nats.Msg {
	h := make(nats.Header, 8+len(e.Extensions()))
	Encode(h, e)
	return &nats.Msg{Subject: subject, Header: h, Data: e.Data()}
}

// Encode writes e's attributes into h in binary mode.
func Encode(h nats.Header, e *event.Event) {
	h["ce-specversion"] = []string{e.SpecVersion()}
	h["ce-id"] = []string{encodeValue(e.ID())}
	h["ce-source"] = []string{encodeValue(e.Source())}
	h["ce-type"] = []string{encodeValue(e.Type())}
	if s := e.Subject(); s != "" {
		h["ce-subject"] = []string{encodeValue(s)}
	}
	if t := e.Time(); !t.IsZero() {
		h["ce-time"] = []string{t.UTC().Format(time.RFC3339Nano)}
	}
	if s := e.DataSchema(); s != "" {
		h["ce-dataschema"] = []string{encodeValue(s)}
	}
	if ct := e.DataContentType(); ct != "" {
		h[HeaderContentType] = []string{ct}
	}
	for name, v := range e.Extensions() {
		s, err := types.Format(v)
		if err != nil {
			continue
		}
		h[HeaderPrefix+name] = []string{encodeValue(s)}
	}
}

// FromMsg decodes a binary- or structured-mode message into an event.
// Attribute values are percent-decoded; the data is not interpreted.
func FromMsg(m *nats.Msg) (event.Event, error) {
	return Decode(m.Header, m.Data)
}

// Decode decodes headers and body into an event (see FromMsg).
func Decode(h nats.Header, body []byte) (event.Event, error) {
	ct := headerGet(h, HeaderContentType)
	mt := strings.ToLower(strings.TrimSpace(strings.SplitN(ct, ";", 2)[0]))
	switch mt {
	case MediaStructured:
		e := event.New()
		if err := json.Unmarshal(body, &e); err != nil {
			return event.Event{}, fmt.Errorf("decoding structured CloudEvent: %w", err)
		}
		return e, nil
	case MediaBatch:
		return event.Event{}, errors.New("batch mode is not supported on NATS: publish one event per message")
	}
	e := event.New()
	var sawVersion bool
	for k, vs := range h {
		if len(vs) == 0 || len(k) <= len(HeaderPrefix) || !strings.EqualFold(k[:len(HeaderPrefix)], HeaderPrefix) {
			continue
		}
		name := strings.ToLower(k[len(HeaderPrefix):])
		v, err := decodeValue(vs[0])
		if err != nil {
			return event.Event{}, fmt.Errorf("header %s: %w", k, err)
		}
		switch name {
		case "specversion":
			sawVersion = true
			if v != event.CloudEventsVersionV1 {
				return event.Event{}, fmt.Errorf("header %s: specversion %q is not supported (use \"1.0\")", k, v)
			}
		case "id":
			e.SetID(v)
		case "source":
			e.SetSource(v)
		case "type":
			e.SetType(v)
		case "subject":
			e.SetSubject(v)
		case "dataschema":
			e.SetDataSchema(v)
		case "time":
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return event.Event{}, fmt.Errorf("header %s: time %q is not RFC 3339", k, v)
			}
			e.SetTime(t)
		case "datacontenttype":
			e.SetDataContentType(v)
		default:
			if !event.IsExtensionNameValid(name) {
				return event.Event{}, fmt.Errorf("header %s: %q is not a valid CloudEvents attribute name (a-z, 0-9)", k, name)
			}
			e.SetExtension(name, v)
		}
	}
	if !sawVersion {
		return event.Event{}, ErrNotCloudEvent
	}
	if ct != "" {
		e.SetDataContentType(ct)
	}
	if len(body) > 0 {
		e.DataEncoded = body
	}
	return e, nil
}

// headerGet is a case-insensitive nats.Header lookup.
func headerGet(h nats.Header, key string) string {
	if vs, ok := h[key]; ok && len(vs) > 0 {
		return vs[0]
	}
	for k, vs := range h {
		if len(vs) > 0 && strings.EqualFold(k, key) {
			return vs[0]
		}
	}
	return ""
}

// encodeValue percent-encodes what the bindings require: space, '"', '%' and
// every byte outside printable ASCII (UTF-8 is encoded byte by byte).
func encodeValue(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if mustEncode(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if mustEncode(c) {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

func mustEncode(c byte) bool { return c <= 0x20 || c >= 0x7f || c == '"' || c == '%' }

// DecodeValue percent-decodes one attribute header value, as the CloudEvents
// NATS and HTTP bindings require of receivers. A '%' not followed by two
// hex digits is an error; the result may still need a UTF-8 check.
func DecodeValue(s string) (string, error) { return decodeValue(s) }

func decodeValue(s string) (string, error) {
	if strings.IndexByte(s, '%') < 0 {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) || unhex(s[i+1]) < 0 || unhex(s[i+2]) < 0 {
			return "", fmt.Errorf("bad percent-encoding in %q", s)
		}
		b = append(b, byte(unhex(s[i+1])<<4|unhex(s[i+2])))
		i += 2
	}
	return string(b), nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
