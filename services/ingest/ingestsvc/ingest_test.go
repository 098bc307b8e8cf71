package ingestsvc

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

const (
	traceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
	traceParHT = "00-" + traceID + "-00f067aa0ba902b7-01"
	traceIDEv  = "0af7651916cd43dd8448eb211c80319c"
	traceParEv = "00-" + traceIDEv + "-b7ad6b7169203331-01"
)

// checkStored asserts what a stored event carries: its session's subject
// in layout, binary-mode attributes, data, Nats-Msg-Id and a trace context
// of wantTrace.
func checkStored(t *testing.T, layout events.Layout, m *jetstream.RawStreamMsg, tenant, session, id, wantTrace string) {
	t.Helper()
	if want := layout.Subject(tenant, session); m.Subject != want {
		t.Errorf("subject %q, want %q", m.Subject, want)
	}
	h := m.Header
	for k, want := range map[string]string{
		"ce-specversion":         "1.0",
		"ce-id":                  id,
		"ce-source":              "test/platform",
		"ce-type":                events.TypeMessage,
		"ce-subject":             session,
		"ce-time":                "2026-01-02T03:04:05Z",
		"ce-" + events.ExtTenant: tenant,
		"Content-Type":           "application/json",
		jetstream.MsgIDHeader:    events.DedupID(tenant, id),
	} {
		if got := h.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if tp := natsce.HeaderCarrier(h).Get("traceparent"); !strings.Contains(tp, wantTrace) {
		t.Errorf("traceparent %q, want trace id %s", tp, wantTrace)
	}
	e, err := natsce.Decode(h, m.Data)
	if err != nil {
		t.Fatalf("decoding stored event: %v", err)
	}
	var msg events.Message
	if err := json.Unmarshal(e.Data(), &msg); err != nil {
		t.Fatal(err)
	}
	if msg.UUID != "u-"+id || msg.Role != "user" || len(msg.Content) != 1 || msg.Content[0].Text != "hello "+id {
		t.Errorf("stored data %s", m.Data)
	}
}

func TestHTTPStructured(t *testing.T) {
	e := startEnv(t, nil)
	status, hdr, body := e.post("/v1/events", tokenAcme, map[string]string{"Content-Type": MediaStructured, "traceparent": traceParHT}, mustMarshal(t, structured("e1", "s1")))
	if status != http.StatusAccepted || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d %s: %s", status, hdr.Get("Content-Type"), body)
	}
	var r Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if r.Accepted != 1 || len(r.Results) != 1 || r.Results[0].Seq != 1 || r.Results[0].ID != "e1" || r.Results[0].Duplicate {
		t.Fatalf("response %s", body)
	}
	msgs := e.stored()
	if len(msgs) != 1 {
		t.Fatalf("%d stored", len(msgs))
	}
	checkStored(t, e.layout, msgs[0], "acme", "s1", "e1", traceID)
}

func TestHTTPBinary(t *testing.T) {
	e := startEnv(t, nil)
	data := mustMarshal(t, message("u-b1", "hello b1"))
	status, _, body := e.post("/v1/events", tokenBeta, map[string]string{
		"Content-Type":   "application/json",
		"ce-specversion": "1.0",
		"ce-id":          "b1",
		"ce-source":      "test/platform",
		"ce-type":        events.TypeMessage,
		"ce-subject":     "s2",
		"ce-time":        "2026-01-02T03:04:05Z",
		"ce-traceparent": traceParEv,
	}, data)
	if status != http.StatusAccepted {
		t.Fatalf("status %d: %s", status, body)
	}
	msgs := e.stored()
	if len(msgs) != 1 {
		t.Fatalf("%d stored", len(msgs))
	}
	// The event's own trace wins over the (absent) request trace.
	checkStored(t, e.layout, msgs[0], "beta", "s2", "b1", traceIDEv)
	if got := msgs[0].Header.Get("ce-traceparent"); got != traceParEv {
		t.Errorf("ce-traceparent %q kept as extension, want %q", got, traceParEv)
	}
}

func TestHTTPBatch(t *testing.T) {
	e := startEnv(t, nil)
	var batch []map[string]any
	for i := range 50 {
		batch = append(batch, structured(string(rune('a'+i%26))+strings.Repeat("x", i/26)+"-id", "s3"))
	}
	status, _, body := e.post("/v1/events", tokenAcme, map[string]string{"Content-Type": MediaBatch, "traceparent": traceParHT}, mustMarshal(t, batch))
	if status != http.StatusAccepted {
		t.Fatalf("status %d: %s", status, body)
	}
	var r Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if r.Accepted != 50 || len(r.Results) != 50 {
		t.Fatalf("response %s", body)
	}
	msgs := e.stored()
	if len(msgs) != 50 {
		t.Fatalf("%d stored, want 50", len(msgs))
	}
	for i, m := range msgs {
		id := batch[i]["id"].(string)
		if r.Results[i].Index != i || r.Results[i].ID != id || r.Results[i].Seq != uint64(i+1) {
			t.Errorf("result %d = %+v", i, r.Results[i])
		}
		checkStored(t, e.layout, m, "acme", "s3", id, traceID)
	}
}

func TestNATSEndpoint(t *testing.T) {
	e := startEnv(t, nil)
	request := func(subject string, hdr nats.Header, body []byte) *nats.Msg {
		t.Helper()
		m, err := e.nc.RequestMsg(&nats.Msg{Subject: subject, Header: hdr, Data: body}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// One structured event; the session comes from the subject.
	ev := structured("n1", "")
	delete(ev, "subject")
	hdr := nats.Header{"traceparent": []string{traceParHT}}
	m := request(events.APISubject(events.VerbIngest, "acme", "s4"), hdr, mustMarshal(t, ev))
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("error %s: %s", code, m.Data)
	}
	// A batch.
	batch := []map[string]any{structured("n2", "s4"), structured("n3", "s4")}
	m = request(events.APISubject(events.VerbIngest, "acme", "s4"), hdr, mustMarshal(t, batch))
	var r Response
	if err := json.Unmarshal(m.Data, &r); err != nil || r.Accepted != 2 {
		t.Fatalf("batch reply %s (%v)", m.Data, err)
	}
	// Binary mode over NATS.
	bin := nats.Header{"traceparent": []string{traceParHT}}
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "n4", "ce-source": "test/platform", "ce-type": events.TypeMessage, "ce-subject": "s4", "ce-time": "2026-01-02T03:04:05Z", "Content-Type": "application/json"} {
		bin.Set(k, v)
	}
	m = request(events.APISubject(events.VerbIngest, "acme", "s4"), bin, mustMarshal(t, message("u-n4", "hello n4")))
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("binary: error %s: %s", code, m.Data)
	}
	msgs := e.stored()
	if len(msgs) != 4 {
		t.Fatalf("%d stored, want 4", len(msgs))
	}
	for i, id := range []string{"n1", "n2", "n3", "n4"} {
		checkStored(t, e.layout, msgs[i], "acme", "s4", id, traceID)
	}

	// Errors are micro errors with the HTTP status as code.
	bad := structured("n5", "other")
	m = request(events.APISubject(events.VerbIngest, "acme", "s4"), nil, mustMarshal(t, bad))
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "400" {
		t.Fatalf("mismatched session: code %q", code)
	}
	want := `subject: "other" does not match the session "s4" of the request subject`
	if got := m.Header.Get(micro.ErrorHeader); got != want {
		t.Fatalf("error %q, want %q", got, want)
	}
	var p events.Problem
	if err := json.Unmarshal(m.Data, &p); err != nil || p.Status != 400 || len(p.Errors) != 1 || p.Errors[0].Field != "subject" {
		t.Fatalf("problem %s", m.Data)
	}
	m = request(events.APISubject(events.VerbIngest, "acme", "s4"), nil, []byte("hello"))
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "400" {
		t.Fatalf("garbage: code %q", code)
	}
	// Over the inline size: stored by claim check (a stub record).
	big := structured("n6", "s4")
	big["data"] = message("u-n6", strings.Repeat("x", 600<<10))
	m = request(events.APISubject(events.VerbIngest, "acme", "s4"), nil, mustMarshal(t, big))
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("claim-checked: code %q: %s", code, m.Data)
	}
	if n := len(e.stored()); n != 5 {
		t.Fatalf("%d stored after bad requests and a large event, want 5", n)
	}
}

func TestDuplicateStoredOnce(t *testing.T) {
	e := startEnv(t, nil)
	body := mustMarshal(t, structured("d1", "s5"))
	hdr := map[string]string{"Content-Type": MediaStructured}
	for i := range 3 {
		status, _, resp := e.post("/v1/events", tokenAcme, hdr, body)
		var r Response
		if err := json.Unmarshal(resp, &r); err != nil || status != http.StatusAccepted {
			t.Fatalf("post %d: %d %s", i, status, resp)
		}
		if res := r.Results[0]; res.Seq != 1 || res.Duplicate != (i > 0) || (i > 0 && r.Duplicates != 1) {
			t.Fatalf("post %d: %s", i, resp)
		}
	}
	// Another tenant may use the same id.
	if status, _, resp := e.post("/v1/events", tokenBeta, hdr, body); status != http.StatusAccepted || !strings.Contains(string(resp), `"seq":2`) {
		t.Fatalf("other tenant: %d %s", status, resp)
	}
	if n := len(e.stored()); n != 2 {
		t.Fatalf("%d stored, want 2", n)
	}
}

func TestOpenModeServesDefaultTenant(t *testing.T) {
	e := startEnv(t, func(c *Config) { c.Tenants = "" })
	status, _, body := e.post("/v1/events", "", map[string]string{"Content-Type": MediaStructured}, mustMarshal(t, structured("o1", "s6")))
	if status != http.StatusAccepted {
		t.Fatalf("status %d: %s", status, body)
	}
	msgs := e.stored()
	if len(msgs) != 1 || msgs[0].Subject != e.layout.Subject(DefaultTenant, "s6") {
		t.Fatalf("stored %v", msgs)
	}
}

func TestOpsEndpoints(t *testing.T) {
	e := startEnv(t, nil)
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200} {
		resp, err := http.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
	e.post("/v1/events", tokenAcme, map[string]string{"Content-Type": MediaStructured}, mustMarshal(t, structured("m1", "s7")))
	e.post("/v1/events", "", map[string]string{"Content-Type": MediaStructured}, mustMarshal(t, structured("m2", "s7")))
	resp, err := http.Get(e.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, want := range []string{`recall_ingest_events_total{`, `outcome="accepted"`, `recall_ingest_rejections_total{`, `reason="unauthenticated"`, `recall_ingest_request_duration_seconds_bucket{`} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
