package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natsperm"
	"github.com/recallhq/recall/internal/replyspace"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// startWithGeneratedUsers starts a harness whose server knows the admin, the
// generated users of the four services and of tenants A and B; services run
// as their own users. Server-side permission violations are kept in the
// returned log.
func startWithGeneratedUsers(t *testing.T) (*harness, *violationLog) {
	t.Helper()
	users := []*server.User{{Username: "admin", Password: "admin-pw"}}
	auth := map[string]natsconn.Config{}
	for _, u := range natsperm.AllServices() {
		users = append(users, u.ServerUser("pw-"+u.Name))
		auth[u.Service] = natsconn.Config{User: u.Name, Password: "pw-" + u.Name}
	}
	for _, tn := range []string{tenantA, tenantB} {
		u, err := natsperm.Tenant(tn, "")
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, u.ServerUser("pw-"+u.Name))
	}
	h := newHarnessWith(t, &server.Options{Users: users}, natsconn.Config{User: "admin", Password: "admin-pw"})
	viol := &violationLog{}
	h.srv.SetLogger(viol, false, false)
	h.ServiceAuth = auth
	return h, viol
}

// tenantConn connects as tenant's generated user, with its inbox prefix.
func tenantConn(t *testing.T, h *harness, tenant string) *nats.Conn {
	t.Helper()
	nc, _ := h.srv.Connect(t, nats.UserInfo("tenant-"+tenant, "pw-tenant-"+tenant),
		nats.CustomInboxPrefix(natsperm.InboxPrefix(tenant)))
	return nc
}

// ingestNATS stores evs through the NATS ingest endpoint as one batch and
// returns the response; any error reply fails the test.
func ingestNATS(t *testing.T, nc *nats.Conn, tenant, session string, evs []event.Event) ingestsvc.Response {
	t.Helper()
	body, err := json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var m *nats.Msg
	testpoll.Until(t, 15*time.Second, "the ingest endpoint answering "+tenant, func() bool { // it may still be starting
		m, err = chunked.Request(ctx, nc, events.APISubject(events.VerbIngest, tenant, session), nil, body)
		return err == nil
	})
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("ingest as %s: %s %s", tenant, code, m.Data)
	}
	var r ingestsvc.Response
	if err := json.Unmarshal(m.Data, &r); err != nil {
		t.Fatalf("ingest reply %s: %v", m.Data, err)
	}
	return r
}

// hostileReplies are reply subjects a tenant might give its requests to
// make a service publish where the tenant may not (the victim's session's
// transcript shard stream and subject in layout).
func hostileReplies(layout events.Layout, victim, session string) []string {
	shard := layout.Stream(victim, session)
	return []string{
		"$JS.API.STREAM.PURGE." + shard,
		"$JS.API.STREAM.DELETE." + events.StreamEvents,
		"$JS.API.STREAM.UPDATE." + shard,
		"$JS.API.CONSUMER.DELETE." + shard + "." + events.DurableTrigger,
		"$JS.API.STREAM.MSG.DELETE." + shard,
		"$KV." + events.BucketMemory + "." + events.MemoryKey(victim, session),
		"$KV." + events.BucketConfig + "." + events.ConfigKey(victim),
		layout.Subject(victim, session),
		events.ExtractSubject(victim, session),
		events.EventsSubject(events.KindExtractionCompleted, victim, session),
		events.APISubject(events.VerbCompact, victim, session),
		natsperm.InboxPrefix(victim) + ".stolen",
		"_INBOX.stolen",
		"$SYS.REQ.SERVER.PING",
		"$SRV.PING",
	}
}

// TestHostileReplySubjects runs every NATS endpoint (ingest, compact,
// extract, memory) under the generated permissions and sends, as tenant A,
// requests for A's own session whose reply subjects point into the
// JetStream API, B's KV keys, transcript, events and inbox, and $SYS. Every
// one is dropped and counted; B's data, the streams and the consumers are
// unchanged; B's inbox receives nothing; no service even attempted a
// forbidden publish. Plain requests still get their answers, over NATS and
// through the HTTP edge.
func TestHostileReplySubjects(t *testing.T) {
	h, viol := startWithGeneratedUsers(t)
	h.Provider = llm.NewOffline()
	h.startTrigger()
	h.startExtractor()
	h.startCompactor()
	base := h.startIngest()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	a, b := tenantConn(t, h, tenantA), tenantConn(t, h, tenantB)
	v := seedVictim(ctx, t, h, a, b)
	want := sendHostileRequests(ctx, t, a, h.prov.Layout())
	checkChunkedReply(ctx, t, v.memKV, a)
	// Through the HTTP edge, the ingest forwards A's compaction and gets
	// the answer in A's reply space.
	if code, body := httpDo(t, "POST", base+"/v1/sessions/own/compact", tokenA, "application/json", []byte(`{}`)); code != 200 {
		t.Fatalf("HTTP compact: %d %s", code, body)
	}
	v.checkUnchanged(ctx, t, h)
	for _, line := range viol.lines() {
		t.Errorf("permission violation (a service tried a forbidden publish): %s", line)
	}
	t.Logf("RELIABILITY hostile replies: %d requests (5 verbs × %d reply subjects) dropped, 0 published; streams, B's transcript (4), B's memory (rev %d) and B's inbox unchanged",
		want, len(hostileReplies(h.prov.Layout(), tenantB, "victim")), v.rev)
}

// victim is tenant B's data that hostile replies must not reach.
type victim struct {
	memKV  jetstream.KeyValue
	rec    []byte
	rev    uint64
	before map[string]streamState
	stolen atomic.Int64 // messages B's inbox received
}

// seedVictim stores B's transcript and memory and A's session, snapshots
// the streams and watches B's inbox.
func seedVictim(ctx context.Context, t *testing.T, h *harness, a, b *nats.Conn) *victim {
	t.Helper()
	var evs []event.Event
	for i := 0; i < 4; i++ {
		evs = append(evs, transcriptEvent(tenantB, "victim", i, 200))
	}
	ingestNATS(t, b, tenantB, "victim", evs)
	ingestNATS(t, a, tenantA, "own", []event.Event{transcriptEvent(tenantA, "own", 0, 200)})
	v := &victim{}
	var err error
	if v.memKV, err = h.js.KeyValue(ctx, events.BucketMemory); err != nil {
		t.Fatal(err)
	}
	v.rec, _ = json.Marshal(events.MemoryRecord{Notes: "B's notes", CoveredSeq: 1})
	if v.rev, err = v.memKV.Put(ctx, events.MemoryKey(tenantB, "victim"), v.rec); err != nil {
		t.Fatal(err)
	}
	v.before = snapshotStreams(t, h.js, h.prov.Layout())
	sub, err := b.Subscribe(natsperm.InboxPrefix(tenantB)+".>", func(*nats.Msg) { v.stolen.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	_ = b.Flush()
	return v
}

// sendHostileRequests sends A's requests to every endpoint with every
// hostile reply subject, then a plain request to each (answered: each
// endpoint handles its requests in order, so the hostile ones were handled)
// and checks that all hostile ones were dropped. It returns their number.
func sendHostileRequests(ctx context.Context, t *testing.T, a *nats.Conn, layout events.Layout) uint64 {
	t.Helper()
	dropped0 := replyspace.Dropped()
	bodies := map[string][]byte{
		events.VerbIngest:  mustJSON(t, []event.Event{transcriptEvent(tenantA, "own", 1, 50)}),
		events.VerbCompact: []byte(`{}`),
		events.VerbEdit:    []byte(`{}`),
		events.VerbExtract: []byte(`{"timeout_ms":2000}`),
		events.VerbMemory:  nil,
	}
	replies := hostileReplies(layout, tenantB, "victim")
	verbs := []string{events.VerbIngest, events.VerbCompact, events.VerbEdit, events.VerbExtract, events.VerbMemory}
	for _, verb := range verbs { // every endpoint serves before the attack
		testpoll.Until(t, 20*time.Second, verb+" endpoint", func() bool {
			_, err := chunked.Request(ctx, a, events.APISubject(verb, tenantA, "own"), nil, bodies[verb])
			return !errors.Is(err, chunked.ErrNoResponders)
		})

	}
	for _, verb := range verbs {
		for _, reply := range replies {
			if err := a.PublishRequest(events.APISubject(verb, tenantA, "own"), reply, bodies[verb]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, verb := range verbs {
		if _, err := chunked.Request(ctx, a, events.APISubject(verb, tenantA, "own"), nil, bodies[verb]); err != nil {
			t.Fatalf("plain %s request: %v", verb, err)
		}
	}
	want := uint64(len(verbs) * len(replies))
	testpoll.Until(t, 10*time.Second, "every hostile request dropped", func() bool { return replyspace.Dropped()-dropped0 >= want })
	if got := replyspace.Dropped() - dropped0; got != want {
		t.Fatalf("dropped %d requests, want %d", got, want)
	}
	return want
}

// checkChunkedReply: a reply larger than one message (the record fits in
// the bucket, the reply with its envelope does not: 2 chunks) arrives,
// published by the extractor's user into A's reply space without any
// response permission.
func checkChunkedReply(ctx context.Context, t *testing.T, memKV jetstream.KeyValue, a *nats.Conn) {
	t.Helper()
	const size = 1045000
	big, _ := json.Marshal(events.MemoryRecord{Notes: strings.Repeat("n", size), CoveredSeq: 1})
	if _, err := memKV.Put(ctx, events.MemoryKey(tenantA, "big"), big); err != nil {
		t.Fatal(err)
	}
	m, err := chunked.Request(ctx, a, events.APISubject(events.VerbMemory, tenantA, "big"), nil, nil)
	var mr events.MemoryReply
	if err != nil || json.Unmarshal(m.Data, &mr) != nil || len(mr.Record.Notes) != size {
		t.Fatalf("chunked memory reply: %v", err)
	}
}

// checkUnchanged compares the streams with the snapshot and checks B's
// transcript, memory and inbox.
func (v *victim) checkUnchanged(ctx context.Context, t *testing.T, h *harness) {
	t.Helper()
	layout := h.prov.Layout()
	after := snapshotStreams(t, h.js, layout)
	for name, st := range v.before {
		a := after[name]
		// The work queue and the notifications move on their own; the
		// transcript and the buckets only grow, and no transcript shard
		// loses a consumer (the trigger's may appear while it starts).
		durable := name != events.StreamExtract && name != events.StreamEvents
		shard := strings.HasPrefix(name, events.StreamTranscriptShardPrefix)
		if a.missing || a.subjects != st.subjects || (durable && (a.msgs < st.msgs || a.firstSeq != st.firstSeq)) ||
			(shard && a.consumers < st.consumers) {
			t.Errorf("stream %s changed: before %+v, after %+v", name, st, a)
		}
	}
	if n := after[layout.Stream(tenantB, "victim")].victim; n != 4 {
		t.Errorf("B's transcript holds %d events, want 4", n)
	}
	e, err := v.memKV.Get(ctx, events.MemoryKey(tenantB, "victim"))
	if err != nil || e.Revision() != v.rev || string(e.Value()) != string(v.rec) {
		t.Errorf("B's memory changed: %v", err)
	}
	if n := v.stolen.Load(); n != 0 {
		t.Errorf("B's inbox received %d messages", n)
	}
}

// streamState is what a hostile reply could change about a stream.
type streamState struct {
	missing        bool
	msgs, firstSeq uint64
	subjects       string
	consumers      int
	victim         uint64 // messages on B's "victim" session subject
}

// snapshotStreams records the state of every transcript shard stream of
// layout and of the other streams a hostile reply could reach.
func snapshotStreams(t *testing.T, js jetstream.JetStream, layout events.Layout) map[string]streamState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[string]streamState{}
	names := append(layout.Streams(), events.StreamEvents, events.StreamExtract, "KV_"+events.BucketMemory, "KV_"+events.BucketConfig)
	victim := layout.Subject(tenantB, "victim")
	for _, name := range names {
		s, err := js.Stream(ctx, name)
		if err != nil {
			out[name] = streamState{missing: true}
			continue
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(victim))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = streamState{msgs: info.State.Msgs, firstSeq: info.State.FirstSeq, subjects: strings.Join(info.Config.Subjects, ","),
			consumers: info.State.Consumers, victim: info.State.Subjects[victim]}
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(fmt.Errorf("encoding: %w", err))
	}
	return b
}

// TestDedupPoisoning: tenant A tries to make tenant B's event "victim-1" a
// duplicate by storing its deduplication id first — directly on A's own
// transcript subject with Nats-Msg-Id "globex:victim-1" (denied: tenants
// have no transcript permission), and through the ingest endpoint with the
// event id "globex:victim-1" (stored under A's id "acme:globex:victim-1").
// B's later event victim-1 is stored, not answered as a duplicate.
func TestDedupPoisoning(t *testing.T) {
	h, viol := startWithGeneratedUsers(t)
	base := h.startIngest()
	a := tenantConn(t, h, tenantA)

	layout := h.prov.Layout()
	m := nats.NewMsg(layout.Subject(tenantA, "s1"))
	m.Header.Set(jetstream.MsgIDHeader, events.DedupID(tenantB, "victim-1"))
	m.Data = mustJSON(t, transcriptEvent(tenantA, "s1", 0, 10))
	if err := a.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 5*time.Second, "the server to refuse the direct publish", func() bool {
		for _, l := range viol.lines() {
			if strings.Contains(l, layout.Subject(tenantA, "s1")) {
				return true
			}
		}
		return false
	})

	forged := transcriptEvent(tenantA, "s1", 1, 10)
	forged.SetID(events.DedupID(tenantB, "victim-1"))
	if r := ingestNATS(t, a, tenantA, "s1", []event.Event{forged}); r.Accepted != 1 || r.Duplicates != 0 {
		t.Fatalf("A's event: %+v", r)
	}

	victim := transcriptEvent(tenantB, "s1", 0, 10)
	victim.SetID("victim-1")
	status, body := httpDo(t, "POST", base+"/v1/events", tokenB, "application/cloudevents+json", mustJSON(t, victim))
	var r ingestsvc.Response
	_ = json.Unmarshal(body, &r)
	if status != 202 || r.Accepted != 1 || r.Duplicates != 0 || len(r.Results) != 1 || r.Results[0].Duplicate {
		t.Fatalf("B's event victim-1: %d %s", status, body)
	}
	stored, snap := uint64(0), snapshotStreams(t, h.js, layout)
	for _, name := range layout.Streams() {
		stored += snap[name].msgs
	}
	if stored != 2 {
		t.Fatalf("the transcript holds %d events, want A's and B's", stored)
	}
	t.Logf("RELIABILITY dedup poisoning: direct publish refused by the server, forged id stored as A's own, B's victim-1 stored at seq %d", r.Results[0].Seq)
}
