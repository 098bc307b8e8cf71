package events

import (
	"encoding/json"
	"reflect"
	"unicode/utf8"
	"unsafe"

	jsoniter "github.com/json-iterator/go"
	"github.com/modern-go/reflect2"
)

// Transcript messages are decoded on every hot path (ingest validation, the
// compactor's transcript reads), and encoding/json scans a custom
// unmarshaler's input several times: Content's string-or-blocks form made
// decoding cost about twice a plain struct. json-iterator, already in the
// dependency graph through the CloudEvents sdk, decodes the same shapes in one
// pass. It is configured like encoding/json (case-insensitive field names,
// RawMessage validated); errors are re-derived with encoding/json so their
// text stays the standard library's.
var (
	fastJSON   = withRawMessages(jsoniter.Config{EscapeHTML: true, SortMapKeys: true, ValidateJsonRawMessage: true}.Froze(), false)
	strictJSON = withRawMessages(jsoniter.Config{EscapeHTML: true, SortMapKeys: true, ValidateJsonRawMessage: true, DisallowUnknownFields: true}.Froze(), true)
)

// withRawMessages makes api decode json.RawMessage as encoding/json does: a
// JSON null becomes the four bytes "null" (json-iterator would leave nil,
// and a tool_use's input then estimates differently than in the trigger).
// It also decodes Content in place (contentDecoder).
func withRawMessages(api jsoniter.API, strict bool) jsoniter.API {
	api.RegisterExtension(&rawMessageExtension{strict: strict})
	return api
}

type rawMessageExtension struct {
	jsoniter.DummyExtension
	strict bool
}

var (
	rawMessageType = reflect2.TypeOf(json.RawMessage(nil))
	contentType    = reflect2.TypeOf(Content(nil))
)

func (x *rawMessageExtension) CreateDecoder(typ reflect2.Type) jsoniter.ValDecoder {
	switch typ {
	case rawMessageType:
		return rawMessageDecoder{}
	case contentType:
		return contentDecoder{strict: x.strict}
	}
	return nil
}

// contentDecoder decodes Content as Content.UnmarshalJSON does, from the
// iterator: json-iterator would otherwise copy each content out (a tool
// result's text: most of a request) and UnmarshalJSON scan it twice more.
// Blocks are decoded leniently in both configurations, as UnmarshalJSON
// does (encoding/json's DisallowUnknownFields does not reach inside a
// custom unmarshaler); in the strict one they are read apart for that.
type contentDecoder struct{ strict bool }

func (d contentDecoder) Decode(ptr unsafe.Pointer, iter *jsoniter.Iterator) {
	c := (*Content)(ptr)
	switch iter.WhatIsNext() {
	case jsoniter.StringValue:
		*c = Content{{Type: BlockText, Text: iter.ReadString()}}
	case jsoniter.NilValue:
		iter.ReadNil()
		*c = nil
	case jsoniter.ArrayValue:
		var blocks []Block
		if d.strict {
			if err := fastJSON.Unmarshal(iter.SkipAndReturnBytes(), &blocks); err != nil {
				iter.ReportError("decode content", err.Error())
				return
			}
		} else {
			iter.ReadVal(&blocks)
		}
		*c = blocks
	default:
		iter.ReportError("decode content", "content must be a string or an array of blocks")
	}
}

type rawMessageDecoder struct{}

func (rawMessageDecoder) Decode(ptr unsafe.Pointer, iter *jsoniter.Iterator) {
	b := iter.SkipAndReturnBytes()
	if iter.Error == nil {
		*(*json.RawMessage)(ptr) = append(json.RawMessage(nil), b...)
	}
}

// DecodeMessage decodes the data of a stored TypeMessage event, leniently
// (unknown fields ignored), without validating it.
func DecodeMessage(data []byte) (*Message, error) {
	m := new(Message)
	if !fastSafe(data) {
		if err := stdUnmarshal(data, m); err != nil {
			return nil, err
		}
		return m, nil
	}
	if err := fastJSON.Unmarshal(data, m); err != nil {
		// Let encoding/json word the error (and be the judge).
		*m = Message{}
		if err := stdUnmarshal(data, m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// fastStrict decodes data into v rejecting unknown fields; it reports
// whether it succeeded. Callers fall back to encoding/json on failure for a
// precise error. data must be fastSafe (checkData establishes it).
func fastStrict(data []byte, v any) bool {
	if err := strictJSON.Unmarshal(data, v); err != nil {
		reflect.ValueOf(v).Elem().SetZero()
		return false
	}
	return true
}

// fastSafe reports whether data may go to the fast decoder: valid UTF-8 and
// no control bytes besides JSON whitespace. json-iterator is laxer than
// encoding/json on those (it stops at a NUL, keeps invalid UTF-8, accepts raw
// control characters in strings), so such input is left to encoding/json.
func fastSafe(data []byte) bool {
	for _, c := range data {
		if c < 0x20 && c != '\n' && c != '\t' && c != '\r' {
			return false
		}
	}
	return utf8.Valid(data)
}
