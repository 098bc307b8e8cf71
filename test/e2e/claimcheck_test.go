package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// bigRequest is a user request of about size bytes whose text starts with
// begin.
func bigRequest(session, id, begin string, size int) map[string]any {
	text := begin + " why does the import fail?\n" + strings.Repeat("2026-11-25T10:00:00Z ERROR importer: row 1812: invalid date \"31/02\"\n", size/70)
	return message(session, id, events.RoleUser, "", events.Block{Type: events.BlockText, Text: text})
}

// postOne posts events as a batch and returns the status and the body.
func postOne(t *testing.T, url string, evs ...map[string]any) (int, []byte) {
	t.Helper()
	body, _ := json.Marshal(evs)
	resp, err := http.Post(url+"/v1/events", ingestsvc.MediaBatch, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// objects counts the objects of events.BucketBlobs.
func objects(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	obs, err := js.ObjectStore(context.Background(), events.BucketBlobs)
	if err != nil {
		t.Fatal(err)
	}
	list, err := obs.List(context.Background())
	if err != nil && err != jetstream.ErrNoObjectsFound {
		t.Fatal(err)
	}
	return len(list)
}

// TestLargeLatestRequestIsStoredAndQuoted: the user's latest request is a
// 600 KB paste, then (later) a 5 MB one — each over one NATS message. Ingest
// stores it by claim check; the compaction quotes that record, not the
// previous request, from the body resolved out of the object store.
func TestLargeLatestRequestIsStoredAndQuoted(t *testing.T) {
	p, srv := startPipeline(t)
	_, js := srv.Connect(t)
	const session = "claim"
	var evs []map[string]any
	for i := range 3 {
		evs = append(evs, workTurn(session, fmt.Sprint("w", i), fmt.Sprintf("step %d of the importer", i))...)
	}
	postBatch(t, p.httpURL, evs)
	waitForNotes(t, js, session, lastSeq(t, js, session))

	for _, tc := range []struct {
		id   string
		size int
	}{{"big600k", 600 << 10}, {"big5m", 5 << 20}} {
		t.Run(tc.id, func(t *testing.T) {
			begin := strings.ToUpper(tc.id) + "-BEGIN"
			postBatch(t, p.httpURL, []map[string]any{bigRequest(session, tc.id, begin, tc.size)})
			seq := lastSeq(t, js, session)
			checkStub(t, js, session, seq, tc.size)

			r := compactWith(t, p.httpURL, session, `{"wait_timeout_ms": 0, "auto_compact_threshold": 67000}`)
			if !r.Served {
				t.Fatalf("not served: %s (%s)", r.Outcome, r.Reason)
			}
			c := contextOf(t, r)
			ref := fmt.Sprintf("record %s (seq %d)", tc.id, seq)
			if !strings.Contains(c.summary, ref) || !strings.Contains(c.summary, begin+" why does the import fail?") {
				t.Fatalf("the summary does not quote %s from its beginning:\n%.600s", ref, c.summary)
			}
			// The agent answers; the notes catch up before the next request.
			postBatch(t, p.httpURL, []map[string]any{message(session, tc.id+"-a", events.RoleAssistant, "end_turn",
				events.Block{Type: events.BlockText, Text: "The dates are day-first; I will parse them as such."})})
			waitForNotes(t, js, session, lastSeq(t, js, session))
		})
	}
}

// checkStub fails unless the record at seq is a claim-check stub, far
// smaller than the event, naming a body of about size bytes.
func checkStub(t *testing.T, js jetstream.JetStream, session string, seq uint64, size int) {
	t.Helper()
	ts, _ := sessionStream(t, js, "default", session)
	m, err := ts.GetMsg(context.Background(), seq)
	if err != nil {
		t.Fatal(err)
	}
	name := m.Header.Get("ce-" + events.ExtBlob)
	if !strings.HasPrefix(name, "default/"+session+"/") || len(m.Data) > 64<<10 {
		t.Fatalf("record %d: claim check %q, %d bytes of data; want a stub", seq, name, len(m.Data))
	}
	var n int
	fmt.Sscan(m.Header.Get("ce-"+events.ExtBlobSize), &n)
	if n < size {
		t.Fatalf("stub says %d bytes, want at least %d", n, size)
	}
}

// TestClaimCheckLimitsAndDuplicates: an event over RECALL_INGEST_MAX_EVENT_BYTES
// is refused with 413 naming the limit and its size, and nothing of it is
// stored; a large event sent twice is stored once, with one object.
func TestClaimCheckLimitsAndDuplicates(t *testing.T) {
	p, srv := startPipeline(t, func(c *ingestsvc.Config) { c.MaxEventBytes = 2 << 20 })
	_, js := srv.Connect(t)
	const session = "limits"

	status, body := postOne(t, p.httpURL, bigRequest(session, "huge", "HUGE", 3<<20))
	var prob events.Problem
	if err := json.Unmarshal(body, &prob); err != nil || status != http.StatusRequestEntityTooLarge ||
		!strings.Contains(prob.Detail, "at most 2097152 allowed") || !strings.Contains(prob.Detail, "event is ") {
		t.Fatalf("over the maximum: %d %.300s", status, body)
	}
	if n := objects(t, js); n != 0 {
		t.Fatalf("%d objects stored for a refused event", n)
	}
	ts, subject := sessionStream(t, js, "default", session)
	if _, err := ts.GetLastMsgForSubject(context.Background(), subject); err == nil {
		t.Fatal("a record was stored for a refused event")
	}

	big := bigRequest(session, "dup", "DUP", 1<<20)
	var seqs []uint64
	for i := range 2 {
		status, body := postOne(t, p.httpURL, big)
		var r ingestsvc.Response
		if err := json.Unmarshal(body, &r); err != nil || status != http.StatusAccepted || len(r.Results) != 1 || r.Results[0].Duplicate != (i == 1) {
			t.Fatalf("send %d: %d %.300s", i, status, body)
		}
		seqs = append(seqs, r.Results[0].Seq)
	}
	if seqs[0] != seqs[1] {
		t.Fatalf("the duplicate answered seq %d, the original %d", seqs[1], seqs[0])
	}
	if n := objects(t, js); n != 1 {
		t.Fatalf("%d objects for one event sent twice, want 1", n)
	}
	info, _ := ts.Info(context.Background())
	if info.State.Msgs != 1 {
		t.Fatalf("%d records, want 1", info.State.Msgs)
	}
}
