package jsonbench

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/bytedance/sonic"
	"github.com/cloudevents/sdk-go/v2/event"
	jsonv2 "github.com/go-json-experiment/json"
	gojson "github.com/goccy/go-json"
	jsoniter "github.com/json-iterator/go"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// message and block mirror events.Message without its custom unmarshaler
// (events.Content accepts a string too), so every library decodes the same
// plain shape.
type message struct {
	UUID       string          `json:"uuid"`
	ParentUUID string          `json:"parent_uuid,omitempty"`
	Role       string          `json:"role"`
	Content    []block         `json:"content"`
	MessageID  string          `json:"message_id,omitempty"`
	StopReason string          `json:"stop_reason,omitempty"`
	Model      string          `json:"model,omitempty"`
	Usage      *events.Usage   `json:"usage,omitempty"`
	Extra      json.RawMessage `json:"extra,omitempty"`
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   []block         `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// corpus is 1,000 generated transcript records as stored (JSON data).
func corpus(b *testing.B) ([][]byte, int64) {
	b.Helper()
	g := benchgen.New(3)
	out := make([][]byte, 1000)
	var n int64
	for i := range out {
		m := g.Message("s000001")
		data, err := json.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = data
		n += int64(len(data))
	}
	return out, n / int64(len(out))
}

type decoder func([]byte, any) error

var decoders = []struct {
	name string
	fn   decoder
}{
	{"encoding-json", json.Unmarshal},
	{"json-iterator", jsoniter.ConfigCompatibleWithStandardLibrary.Unmarshal},
	{"go-json", gojson.Unmarshal},
	{"sonic", sonic.ConfigStd.Unmarshal},
	{"json-v2", func(b []byte, v any) error { return jsonv2.Unmarshal(b, v) }},
}

func BenchmarkDecodeMessage(b *testing.B) {
	docs, size := corpus(b)
	for _, d := range decoders {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				var m message
				if err := d.fn(docs[i%len(docs)], &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTriggerReduce compares the trigger's single-pass reader
// (memory.DecodeTriggerMessage, which builds no message) with decoding the
// message with each library and reducing it.
func BenchmarkTriggerReduce(b *testing.B) {
	docs, size := corpus(b)
	b.Run("scanner", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := memory.DecodeTriggerMessage(1, 1, docs[i%len(docs)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, d := range decoders {
		b.Run(d.name+"+reduce", func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				var m events.Message
				if err := d.fn(docs[i%len(docs)], &m); err != nil {
					b.Fatal(err)
				}
				_ = memory.MessageRecord(1, 1, &m)
			}
		})
	}
}

// BenchmarkEncodeBatch encodes 48 messages, a compaction reply's kept
// records.
func BenchmarkEncodeBatch(b *testing.B) {
	docs, _ := corpus(b)
	batch := make([]message, 48)
	var size int64
	for i := range batch {
		if err := json.Unmarshal(docs[i], &batch[i]); err != nil {
			b.Fatal(err)
		}
		size += int64(len(docs[i]))
	}
	encoders := []struct {
		name string
		fn   func(any) ([]byte, error)
	}{
		{"encoding-json", json.Marshal},
		{"json-iterator", jsoniter.ConfigCompatibleWithStandardLibrary.Marshal},
		{"go-json", gojson.Marshal},
		{"sonic", sonic.ConfigStd.Marshal},
		{"json-v2", func(v any) ([]byte, error) { return jsonv2.Marshal(v) }},
	}
	for _, e := range encoders {
		b.Run(e.name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.fn(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeReply encodes a compaction reply as the compactor does: 48
// kept records held as CloudEvents, whose MarshalJSON output each library
// either re-validates (encoding/json) or writes as is.
func BenchmarkEncodeReply(b *testing.B) {
	docs, _ := corpus(b)
	reply := events.CompactReply{Outcome: "session_memory", Served: true, Kept: make([]event.Event, 48)}
	for i := range reply.Kept {
		e := event.New()
		e.SetID(fmt.Sprintf("s000001-%d", i))
		e.SetSource("/bench")
		e.SetType(events.TypeMessage)
		if err := e.SetData(event.ApplicationJSON, json.RawMessage(docs[i])); err != nil {
			b.Fatal(err)
		}
		reply.Kept[i] = e
	}
	size, err := json.Marshal(reply)
	if err != nil {
		b.Fatal(err)
	}
	encoders := []struct {
		name string
		fn   func(any) ([]byte, error)
	}{
		{"encoding-json", json.Marshal},
		{"json-iterator", jsoniter.ConfigCompatibleWithStandardLibrary.Marshal},
		{"go-json", gojson.Marshal},
		{"sonic", sonic.ConfigStd.Marshal},
		{"json-v2", func(v any) ([]byte, error) { return jsonv2.Marshal(v) }},
	}
	for _, e := range encoders {
		b.Run(e.name, func(b *testing.B) {
			b.SetBytes(int64(len(size)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.fn(reply); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
