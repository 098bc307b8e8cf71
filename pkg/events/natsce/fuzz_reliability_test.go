package natsce_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// fuzzHeader parses "Key: value" lines into a NATS header.
func fuzzHeader(s string) nats.Header {
	h := nats.Header{}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		h[strings.TrimSpace(k)] = append(h[strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	return h
}

// FuzzDecode feeds arbitrary headers and bodies to the NATS binding. Decode
// must not panic; an event it accepts and ingest validation accepts must
// survive a binary-mode round trip unchanged, validate again, and encode to
// header values that cannot break the NATS header block (no CR or LF).
func FuzzDecode(f *testing.F) {
	msg := `{"uuid":"u1","role":"user","content":"hi"}`
	f.Add("ce-specversion: 1.0\nce-id: e1\nce-source: test\nce-type: "+events.TypeMessage+"\nce-subject: s1\nContent-Type: application/json", []byte(msg))
	f.Add("ce-specversion: 1.0\nce-id: e%0A1\nce-source: a%20b\nce-type: "+events.TypeMessage+"\nce-subject: s1\nce-time: 2025-01-02T03:04:05.123Z\nce-recalltenant: t1", []byte(msg))
	f.Add("Content-Type: application/cloudevents+json", []byte(`{"specversion":"1.0","id":"e2","source":"x","type":"`+events.TypeSessionEnded+`","subject":"s2","data":{"reason":"done"}}`))
	f.Add("Content-Type: application/cloudevents-batch+json", []byte(`[]`))
	f.Add("ce-specversion: 0.3\nce-id: x", []byte(nil))
	f.Add("ce-specversion: 1.0\nce-BAD_name: v\nce-id: %zz", []byte("{"))
	f.Fuzz(func(t *testing.T, hdr string, body []byte) {
		e, err := natsce.Decode(fuzzHeader(hdr), body)
		if err != nil {
			return
		}
		s, err := events.ValidateIngest(e, "t1")
		if err != nil {
			return
		}
		m := natsce.NewMsg(events.NewLayout(events.DefaultShards).Subject("t1", s.Session), &s.Event)
		for k, vs := range m.Header {
			for _, v := range vs {
				if strings.ContainsAny(k+v, "\r\n") {
					t.Fatalf("header %q: %q breaks the header block", k, v)
				}
			}
		}
		back, err := natsce.FromMsg(m)
		if err != nil {
			t.Fatalf("re-decoding an encoded valid event: %v", err)
		}
		if back.ID() != s.Event.ID() || back.Source() != s.Event.Source() || back.Type() != s.Event.Type() ||
			back.Subject() != s.Event.Subject() || !back.Time().Equal(s.Event.Time()) || !bytes.Equal(back.Data(), s.Event.Data()) {
			t.Fatalf("round trip changed the event:\n%v\n%v", s.Event, back)
		}
		if got := back.Extensions()[events.ExtTenant]; got != "t1" {
			t.Fatalf("tenant extension %v after the round trip", got)
		}
		if _, err := events.ValidateIngest(back, "t1"); err != nil {
			t.Fatalf("a stored event no longer validates: %v", err)
		}
		if _, err := events.ValidateIngest(back, "t2"); err == nil {
			t.Fatal("a stored event of tenant t1 validates as tenant t2")
		}
	})
}
