package ingestsvc

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

// badCase is one rejected request: its exact status and problem detail, and
// how many of its events are stored (0 unless the batch is mixed).
type badCase struct {
	name       string
	token      string
	hdr        map[string]string
	body       []byte
	wantStatus int
	wantDetail string
	wantField  string // field of the first rejected event, when per event
	wantStored int
}

func TestBadInputs(t *testing.T) {
	e := startEnv(t, func(c *Config) {
		c.MaxEventBytes = 16 << 10
		c.MaxBatchEvents = 10
		c.MaxBodyBytes = 64 << 10
	})
	sj := map[string]string{"Content-Type": MediaStructured}
	bj := map[string]string{"Content-Type": MediaBatch}
	// with returns a structured event with one attribute changed (nil
	// deletes it).
	with := func(id string, kv ...any) []byte {
		ev := structured(id, "sess")
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(ev, kv[i].(string))
			} else {
				ev[kv[i].(string)] = kv[i+1]
			}
		}
		return mustMarshal(t, ev)
	}
	data := func(kv ...any) map[string]any {
		d := map[string]any{"uuid": "u1", "role": "user", "content": "hi"}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(d, kv[i].(string))
			} else {
				d[kv[i].(string)] = kv[i+1]
			}
		}
		return d
	}
	binary := func(kv ...string) map[string]string {
		h := map[string]string{"Content-Type": "application/json", "ce-specversion": "1.0", "ce-id": "bin1", "ce-source": "test", "ce-type": events.TypeMessage, "ce-subject": "sess"}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(h, kv[i])
			} else {
				h[kv[i]] = kv[i+1]
			}
		}
		return h
	}
	invalidUTF8 := []byte(`{"specversion":"1.0","id":"x1","source":"t","type":"` + events.TypeMessage + `","subject":"sess","data":{"uuid":"u1","role":"user","content":"bad ` + "\xff\xfe" + ` bytes"}}`)
	batchOf := func(evs ...[]byte) []byte { return append(append([]byte("["), bytes.Join(evs, []byte(","))...), ']') }
	var tooMany [][]byte
	for i := range 11 {
		tooMany = append(tooMany, with("many"+string(rune('a'+i))))
	}
	idChars := "use A-Z a-z 0-9 - _"

	cases := []badCase{
		{"missing id", tokenAcme, sj, with("", "id", nil), 400, "id: required", "id", 0},
		{"empty id", tokenAcme, sj, with(""), 400, "id: required", "id", 0},
		{"missing source", tokenAcme, sj, with("a1", "source", nil), 400, "source: required", "source", 0},
		{"empty source", tokenAcme, sj, with("a1", "source", ""), 400, "source: required", "source", 0},
		{"missing type", tokenAcme, sj, with("a1", "type", nil), 400, "type: required", "type", 0},
		{"missing subject", tokenAcme, sj, with("a1", "subject", nil), 400, "subject: required: the session id", "subject", 0},
		{"unknown type", tokenAcme, sj, with("a1", "type", "com.example.thing"), 400, `type: unknown event type "com.example.thing" (accepted: ` + strings.Join(ingestTypeNames(), ", ") + ")", "type", 0},
		{"producer-only type", tokenAcme, sj, with("a1", "type", events.TypeExtractionCompleted), 400, `type: unknown event type "` + events.TypeExtractionCompleted + `" (accepted: ` + strings.Join(ingestTypeNames(), ", ") + ")", "type", 0},
		{"unsupported specversion", tokenAcme, sj, with("a1", "specversion", "0.3"), 400, `specversion: "0.3" is not supported (use "1.0")`, "specversion", 0},
		{"invalid JSON", tokenAcme, sj, []byte(`{"specversion":"1.0","id":`), 400, "event: invalid JSON: unexpected end of JSON input", "event", 0},
		{"time not RFC 3339", tokenAcme, sj, with("a1", "time", "yesterday"), 400, `time: "yesterday" is not an RFC 3339 timestamp`, "time", 0},
		{"id not a string", tokenAcme, sj, with("a1", "id", 42), 400, "id: must be a JSON string", "id", 0},
		{"data missing", tokenAcme, sj, with("a1", "data", nil), 400, "data: required", "data", 0},
		{"data not JSON content type", tokenAcme, sj, with("a1", "datacontenttype", "text/plain", "data", "hello"), 400, `datacontenttype: "text/plain" is not JSON (use application/json)`, "datacontenttype", 0},
		{"data wrong role", tokenAcme, sj, with("a1", "data", data("role", "system")), 400, `data.role: "system" is not a role (use "user" or "assistant")`, "data.role", 0},
		{"data missing uuid", tokenAcme, sj, with("a1", "data", data("uuid", nil)), 400, "data.uuid: required", "data.uuid", 0},
		{"data unknown field", tokenAcme, sj, with("a1", "data", data("colour", "red")), 400, `data: invalid JSON: unknown field "colour"`, "data", 0},
		{"data tool_use without id", tokenAcme, sj, with("a1", "data", data("role", "assistant", "content", []any{map[string]any{"type": "tool_use", "name": "Read"}})), 400, "data.content[0].id: required for tool_use", "data.content[0].id", 0},
		{"data unknown block", tokenAcme, sj, with("a1", "data", data("content", []any{map[string]any{"type": "video"}})), 400, `data.content[0].type: unknown block type "video"`, "data.content[0].type", 0},
		{"invalid UTF-8", tokenAcme, sj, invalidUTF8, 400, "data: not valid UTF-8", "data", 0},
		{"session with dot", tokenAcme, sj, with("a1", "subject", "a.b"), 400, "subject: session id: invalid id: character '.' at byte 1 is not allowed (" + idChars + ")", "subject", 0},
		{"session with star", tokenAcme, sj, with("a1", "subject", "a*"), 400, "subject: session id: invalid id: character '*' at byte 1 is not allowed (" + idChars + ")", "subject", 0},
		{"session with gt", tokenAcme, sj, with("a1", "subject", ">"), 400, "subject: session id: invalid id: character '>' at byte 0 is not allowed (" + idChars + ")", "subject", 0},
		{"session with space", tokenAcme, sj, with("a1", "subject", "my session"), 400, "subject: session id: invalid id: character ' ' at byte 2 is not allowed (" + idChars + ")", "subject", 0},
		{"session too long", tokenAcme, sj, with("a1", "subject", strings.Repeat("s", 129)), 400, "subject: session id: invalid id: 129 bytes, at most 128 allowed", "subject", 0},
		{"session non-ASCII", tokenAcme, sj, with("a1", "subject", "séance"), 400, "subject: session id: invalid id: non-ASCII byte 0xc3 at byte 1 is not allowed (" + idChars + ")", "subject", 0},
		{"tenant spoofed", tokenAcme, sj, with("a1", events.ExtTenant, "beta"), 403, "recalltenant: " + events.ErrTenantMismatch.Error(), events.ExtTenant, 0},
		{"wrong content type", tokenAcme, map[string]string{"Content-Type": "text/plain"}, with("a1"), 415, `Content-Type "text/plain" is not a CloudEvents mode: use application/cloudevents+json (one event), application/cloudevents-batch+json (a JSON array of events), or binary mode (ce-specversion, ce-id, ... headers and Content-Type application/json)`, "", 0},
		{"plain JSON without ce headers", tokenAcme, map[string]string{"Content-Type": "application/json"}, with("a1"), 415, `Content-Type "application/json" is not a CloudEvents mode: use application/cloudevents+json (one event), application/cloudevents-batch+json (a JSON array of events), or binary mode (ce-specversion, ce-id, ... headers and Content-Type application/json)`, "", 0},
		{"binary with text data", tokenAcme, binary("Content-Type", "text/plain"), []byte("hi"), 415, `binary-mode event data must be JSON (Content-Type application/json), not "text/plain"`, "", 0},
		{"binary missing id", tokenAcme, binary("ce-id", ""), mustMarshal(t, data()), 400, "id: required", "id", 0},
		{"binary session with dot", tokenAcme, binary("ce-subject", "x.y"), mustMarshal(t, data()), 400, "subject: session id: invalid id: character '.' at byte 1 is not allowed (" + idChars + ")", "subject", 0},
		{"binary tenant spoofed", tokenAcme, binary("ce-recalltenant", "beta"), mustMarshal(t, data()), 403, "recalltenant: " + events.ErrTenantMismatch.Error(), events.ExtTenant, 0},
		{"oversized event", tokenAcme, sj, with("big", "data", data("content", strings.Repeat("x", 17<<10))), 413, "event is 17636 bytes, at most 16384 allowed", "", 0},
		{"oversized batch", tokenAcme, bj, batchOf(tooMany...), 413, "batch has more than 10 events, at most 10 allowed", "", 0},
		{"oversized body", tokenAcme, bj, batchOf(with("b1", "data", data("content", strings.Repeat("x", 15<<10))), with("b2", "data", data("content", strings.Repeat("x", 15<<10))), with("b3", "data", data("content", strings.Repeat("x", 15<<10))), with("b4", "data", data("content", strings.Repeat("x", 15<<10))), with("b5", "data", data("content", strings.Repeat("x", 15<<10)))), 413, "request body is 77941 bytes, at most 65536 allowed", "", 0},
		{"batch not an array", tokenAcme, bj, with("a1"), 400, "batch body must be a JSON array of CloudEvents", "", 0},
		{"batch invalid JSON", tokenAcme, bj, []byte(`[{"id":`), 400, "batch body is not valid JSON: unexpected end of JSON input", "", 0},
		{"empty batch", tokenAcme, bj, []byte("[]"), 400, "empty batch: send at least one event", "", 0},
		{"batch element not an object", tokenAcme, bj, []byte(`[42]`), 400, "event: not a CloudEvent: expected a JSON object", "event", 0},
		{"mixed batch", tokenAcme, bj, batchOf(with("m1"), with("m2", "subject", "a.b"), with("m3"), with("m4", "type", "x.y")), 207, "2 of 4 events rejected (first: event 1: subject: session id: invalid id: character '.' at byte 1 is not allowed (use A-Z a-z 0-9 - _)); the other 2 are stored", "subject", 2},
		{"batch with trailing garbage", tokenAcme, bj, append(batchOf(with("tg1")), []byte(" garbage")...), 400, "batch body has data after the array (at byte " + itoa(len(batchOf(with("tg1")))+1) + "): send one JSON array", "", 0},
		{"batch with a second array", tokenAcme, bj, append(batchOf(with("tg2")), batchOf(with("tg3"))...), 400, "batch body has data after the array (at byte " + itoa(len(batchOf(with("tg2")))+1) + "): send one JSON array", "", 0},
		{"duplicate id member", tokenAcme, sj, []byte(`{"specversion":"1.0","id":"d1","id":"d2","source":"t","type":"` + events.TypeMessage + `","subject":"sess","data":{"uuid":"u1","role":"user","content":"hi"}}`), 400, `event: duplicate member name "id" in $ (each member name may appear once per object)`, "event", 0},
		{"duplicate data member", tokenAcme, sj, []byte(`{"specversion":"1.0","id":"d3","source":"t","type":"` + events.TypeMessage + `","subject":"sess","data":{"uuid":"u1","role":"user","role":"assistant","content":"hi"}}`), 400, `event: duplicate member name "role" in $.data (each member name may appear once per object)`, "event", 0},
		{"duplicate member in a batch element", tokenAcme, bj, batchOf([]byte(`{"specversion":"1.0","id":"d4","source":"t","type":"` + events.TypeMessage + `","subject":"sess","data":{"uuid":"u1","role":"user","content":[{"type":"text","text":"a","text":"b"}]}}`)), 400, `event: duplicate member name "text" in $.data.content[0] (each member name may appear once per object)`, "event", 0},
		{"duplicate member in binary data", tokenAcme, binary("ce-id", "d5"), []byte(`{"uuid":"u1","uuid":"u2","role":"user","content":"hi"}`), 400, `data: duplicate member name "uuid" in $ (each member name may appear once per object)`, "data", 0},
		{"binary source bad percent-encoding", tokenAcme, binary("ce-id", "pe1", "ce-source", "t%FZ"), []byte(`{"uuid":"u1","role":"user","content":"hi"}`), 400, "source: header ce-source: a '%' must start a percent-encoded byte (%XX)", "source", 0},
		{"binary source not UTF-8 once decoded", tokenAcme, binary("ce-id", "pe2", "ce-source", "t%FF"), []byte(`{"uuid":"u1","role":"user","content":"hi"}`), 400, "source: header ce-source: not valid UTF-8 once percent-decoded", "source", 0},
		{"no token", "", sj, with("a1"), 401, ErrUnauthenticated.Error(), "", 0},
		{"unknown token", "not-a-token", sj, with("a1"), 401, ErrUnauthenticated.Error(), "", 0},
	}
	stored := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, hdr, body := e.post("/v1/events", c.token, c.hdr, c.body)
			if status != c.wantStatus {
				t.Fatalf("status %d, want %d: %s", status, c.wantStatus, body)
			}
			if ct := hdr.Get("Content-Type"); ct != MediaProblem {
				t.Errorf("Content-Type %q, want %s", ct, MediaProblem)
			}
			var p events.Problem
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("body is not a problem: %s", body)
			}
			if p.Status != c.wantStatus || !strings.HasPrefix(p.Type, ProblemTypeBase) || p.Title != http.StatusText(c.wantStatus) {
				t.Errorf("problem %s", body)
			}
			if c.wantDetail != "" && p.Detail != c.wantDetail {
				t.Errorf("detail\n got %q\nwant %q", p.Detail, c.wantDetail)
			}
			if c.wantField != "" {
				if len(p.Errors) == 0 || p.Errors[0].Field != c.wantField {
					t.Errorf("errors %+v, want first field %q", p.Errors, c.wantField)
				}
			}
			t.Logf("%d %s", status, p.Detail)
			stored += c.wantStored
			if n := len(e.stored()); n != stored {
				t.Fatalf("%d events stored, want %d", n, stored)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func ingestTypeNames() []string {
	return []string{events.TypeMessage, events.TypeSessionStarted, events.TypeSessionCompacting, events.TypeSessionCompacted, events.TypeSessionEnded}
}
