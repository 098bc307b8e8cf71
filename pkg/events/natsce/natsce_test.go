package natsce_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

func TestBinaryEncoding(t *testing.T) {
	e := event.New()
	e.SetID("id with space, \"quote\", 100% and é")
	e.SetSource("urn:src")
	e.SetType(events.TypeMessage)
	e.SetSubject("s1")
	e.SetTime(time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC))
	e.SetExtension("recalltenant", "t1")
	_ = e.SetData(event.ApplicationJSON, map[string]string{"a": "b"})
	m := natsce.NewMsg("subj", &e)
	for k, want := range map[string]string{
		"ce-id":           "id%20with%20space,%20%22quote%22,%20100%25%20and%20%C3%A9",
		"ce-specversion":  "1.0",
		"ce-time":         "2025-01-02T03:04:05.000006Z",
		"ce-recalltenant": "t1",
		"Content-Type":    "application/json",
	} {
		if got := m.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	back, err := natsce.FromMsg(m)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID() != e.ID() || !back.Time().Equal(e.Time()) || string(back.Data()) != `{"a":"b"}` || back.Extensions()["recalltenant"] != "t1" {
		t.Fatalf("round trip: %v", back)
	}
}

func TestDecodeErrors(t *testing.T) {
	for name, c := range map[string]struct {
		hdr  nats.Header
		want string
	}{
		"not a cloudevent": {nats.Header{"X": {"y"}}, natsce.ErrNotCloudEvent.Error()},
		"old specversion":  {nats.Header{"ce-specversion": {"0.3"}}, `header ce-specversion: specversion "0.3" is not supported (use "1.0")`},
		"bad percent":      {nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"a%zz"}}, `header ce-id: bad percent-encoding in "a%zz"`},
		"bad time":         {nats.Header{"ce-specversion": {"1.0"}, "ce-time": {"noon"}}, `header ce-time: time "noon" is not RFC 3339`},
		"bad extension":    {nats.Header{"ce-specversion": {"1.0"}, "ce-bad_name": {"x"}}, `header ce-bad_name: "bad_name" is not a valid CloudEvents attribute name (a-z, 0-9)`},
		"batch":            {nats.Header{"Content-Type": {natsce.MediaBatch}}, "batch mode is not supported on NATS: publish one event per message"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := natsce.Decode(c.hdr, nil)
			if err == nil || err.Error() != c.want {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	// Header names are case-insensitive.
	e, err := natsce.Decode(nats.Header{"CE-SPECVERSION": {"1.0"}, "Ce-Id": {"x"}, "content-type": {"application/json"}}, []byte("{}"))
	if err != nil || e.ID() != "x" || e.DataContentType() != "application/json" {
		t.Fatalf("mixed-case headers: %v %v", e, err)
	}
}

func TestTracePropagation(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for name, h := range map[string]nats.Header{
		"lower":     {"traceparent": {tp}},
		"canonical": {"Traceparent": {tp}},
		"extension": {"ce-traceparent": {tp}},
	} {
		sc := trace.SpanContextFromContext(natsce.Extract(context.Background(), h))
		if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("%s: trace id %s", name, sc.TraceID())
		}
	}
	ctx := natsce.Extract(context.Background(), nats.Header{"Traceparent": {tp}})
	h := nats.Header{"TRACEPARENT": {"stale"}}
	natsce.Inject(ctx, h)
	if len(h) != 1 || h.Get("traceparent") != tp {
		t.Fatalf("inject replaced every spelling by one lower-case key: %v", h)
	}
	e := event.New()
	e.SetExtension("traceparent", tp)
	if sc := trace.SpanContextFromContext(natsce.ExtractEvent(context.Background(), &e)); !sc.IsValid() {
		t.Fatal("ExtractEvent found no span context")
	}
}

// FuzzBinaryRoundTrip builds events from arbitrary attribute values and
// checks decode(encode(e)) == e, and that no encoded header value can break
// the NATS header block.
func FuzzBinaryRoundTrip(f *testing.F) {
	f.Add("e1", "urn:x", "s1", "v", int64(0), []byte(`{}`))
	f.Add("id\nwith\r\nnewlines", "a b", "sess%20", "100%", int64(1700000000123456789), []byte("\xff"))
	f.Add("", "", "", "", int64(-1), []byte(nil))
	f.Fuzz(func(t *testing.T, id, source, subject, ext string, unixNano int64, data []byte) {
		e := event.New()
		e.SetID(id)
		e.SetSource(source)
		e.SetType(events.TypeMessage)
		if subject != "" {
			e.SetSubject(subject)
		}
		if unixNano > 0 {
			e.SetTime(time.Unix(0, unixNano).UTC())
		}
		if ext != "" {
			e.SetExtension("fuzzext", ext)
		}
		if len(data) > 0 {
			e.DataEncoded = data
			e.SetDataContentType("application/json")
		}
		if e.Validate() != nil || !utf8.ValidString(id+source+subject+ext) {
			return
		}
		m := natsce.NewMsg("s", &e)
		for k, vs := range m.Header {
			for _, v := range vs {
				if strings.ContainsAny(v, "\r\n") {
					t.Fatalf("header %s value %q breaks the header block", k, v)
				}
			}
		}
		back, err := natsce.FromMsg(m)
		if err != nil {
			t.Fatalf("decoding what was encoded: %v", err)
		}
		if back.ID() != e.ID() || back.Source() != e.Source() || back.Type() != e.Type() || back.Subject() != e.Subject() ||
			!back.Time().Equal(e.Time()) || back.DataContentType() != e.DataContentType() || string(back.Data()) != string(e.Data()) ||
			!reflect.DeepEqual(back.Extensions(), e.Extensions()) {
			t.Fatalf("round trip changed the event:\n%v\n%v", e, back)
		}
	})
}
