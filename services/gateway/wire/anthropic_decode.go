package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"unicode/utf8"

	jsoniter "github.com/json-iterator/go"

	"github.com/recallhq/recall/pkg/events"
)

// messagesFields are the top-level fields of MessagesRequest, by name.
var messagesFields = []string{"model", "stream", "max_tokens", "system", "messages", "metadata", "context_management", "compaction"}

// decodeMessagesFast is DecodeMessages in about three passes over the body:
// a byte check, json-iterator walking the top-level object and cutting out
// each message (its Raw), and events.DecodeMessage decoding it from those
// bytes. encoding/json took about eight on a 1 MB body (the raw map, the
// struct, each message again inside its UnmarshalJSON, each string content
// twice more) and four times the CPU. ok is false when
// the body is not plainly valid — control bytes or invalid UTF-8, a field
// name that only case-folds to a known one, any syntax or type error — and
// encoding/json is then the judge (decodeMessagesStd).
func decodeMessagesFast(body []byte) (*MessagesRequest, bool) {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' || !plain(body) {
		return nil, false
	}
	r := &MessagesRequest{Raw: map[string]json.RawMessage{}}
	iter := jsoniter.ParseBytes(jsoniter.ConfigDefault, body)
	ok := true
	iter.ReadObjectCB(func(it *jsoniter.Iterator, field string) bool {
		if field == "messages" {
			ok = decodeMsgs(it, r)
			return ok
		}
		raw := it.SkipAndReturnBytes()
		if it.Error != nil {
			return false
		}
		r.Raw[field] = raw
		ok = r.setField(field, raw)
		return ok
	})
	if !ok || iter.Error != nil {
		return nil, false
	}
	iter.WhatIsNext() // only white space may follow: the end (io.EOF)
	return r, iter.Error == io.EOF
}

// decodeMsgs decodes the messages array at it into r.Messages.
func decodeMsgs(it *jsoniter.Iterator, r *MessagesRequest) bool {
	if it.ReadNil() {
		r.Messages = nil
		return true
	}
	r.Messages = []Msg{} // encoding/json: an empty array is not nil
	ok := true
	it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
		raw := it.SkipAndReturnBytes()
		if it.Error != nil {
			return false
		}
		m, err := events.DecodeMessage(raw)
		if err != nil {
			ok = false
			return false
		}
		r.Messages = append(r.Messages, Msg{Message: *m, Raw: raw})
		return true
	})
	return ok && it.Error == nil
}

// setField decodes a known top-level field from raw (encoding/json: they
// are small; a RawMessage field keeps the bytes, "null" included, as
// encoding/json does); false on a type error or a name that only
// case-folds to one.
func (r *MessagesRequest) setField(field string, raw []byte) bool {
	var err error
	switch field {
	case "model":
		err = json.Unmarshal(raw, &r.Model)
	case "stream":
		err = json.Unmarshal(raw, &r.Stream)
	case "max_tokens":
		err = json.Unmarshal(raw, &r.MaxTokens)
	case "system":
		r.System = raw
	case "metadata":
		r.Metadata = nil
		err = json.Unmarshal(raw, &r.Metadata)
	case "context_management":
		r.ContextManagement = raw
	case "compaction":
		r.Compaction = raw
	default:
		for _, f := range messagesFields {
			if strings.EqualFold(f, field) {
				return false
			}
		}
	}
	return err == nil
}

// plain reports whether body has no control bytes but JSON whitespace and
// is valid UTF-8, where json-iterator and encoding/json agree.
func plain(body []byte) bool {
	for _, c := range body {
		if c < 0x20 && c != '\n' && c != '\t' && c != '\r' {
			return false
		}
	}
	return utf8.Valid(body)
}
