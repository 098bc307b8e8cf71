package ingestsvc

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// FuzzHTTPDecode drives the edge's decode and validate path with arbitrary
// bodies in each mode. It must never panic; an accepted event must have a
// safe session id, carry the tenant, and survive the binary-mode encoding
// Recall stores it in.
func FuzzHTTPDecode(f *testing.F) {
	f.Add(uint8(0), []byte(`{"specversion":"1.0","id":"e1","source":"s","type":"dev.recall.transcript.message","subject":"s1","data":{"uuid":"u","role":"user","content":"hi"}}`), "")
	f.Add(uint8(1), []byte(`[{"specversion":"1.0","id":"e1","source":"s","type":"dev.recall.session.ended","subject":"s1","data":{}}]`), "")
	f.Add(uint8(2), []byte(`{"uuid":"u","role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{}}]}`), "s1")
	f.Add(uint8(0), []byte(`{"specversion":"1.0","id":"e\u0001","source":"s","type":"x","subject":"a.b"}`), "")
	limits := Limits{MaxEventBytes: 64 << 10, MaxBatchEvents: 50, MaxBodyBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, mode uint8, body []byte, subject string) {
		var items []item
		switch mode % 3 {
		case 0:
			hdr := http.Header{"Content-Type": {MediaStructured}}
			items = []item{decodeSingle(context.Background(), hdr, body, limits.MaxEventBytes)}
		case 1:
			items, _ = decodeBatch(body, limits)
		case 2:
			hdr := http.Header{"Content-Type": {"application/json"}, "Ce-Specversion": {"1.0"}, "Ce-Id": {"x"}, "Ce-Source": {"fuzz"},
				"Ce-Type": {events.TypeMessage}, "Ce-Subject": {subject}}
			items = []item{decodeSingle(context.Background(), hdr, body, limits.MaxEventBytes)}
		}
		for _, it := range items {
			if it.err != nil {
				r := rejection(0, it.id, it.err)
				if r.Status != 400 && r.Status != 413 {
					t.Fatalf("decode error gives status %d: %v", r.Status, it.err)
				}
				continue
			}
			s, err := events.ValidateIngest(it.ev, "fuzz")
			if err != nil {
				continue
			}
			if events.ValidateID(s.Session) != nil || strings.ContainsAny(s.Session, ".*> \t\r\n") {
				t.Fatalf("accepted unsafe session %q", s.Session)
			}
			m := natsce.NewMsg(testLayout.Subject("fuzz", s.Session), &s.Event)
			back, err := natsce.Decode(m.Header, m.Data)
			if err != nil {
				t.Fatalf("stored form does not decode: %v", err)
			}
			if back.ID() != s.Event.ID() || back.Subject() != s.Session || back.Type() != s.Event.Type() || back.Source() != s.Event.Source() ||
				back.Extensions()[events.ExtTenant] != "fuzz" || !bytes.Equal(back.Data(), s.Event.Data()) {
				t.Fatalf("binary round trip changed the event:\n%v\n%v", s.Event, back)
			}
		}
	})
}
