package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/export"
	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

const marker = "QUOKKA7731"

// buildSession stores a session of alice with everything: memory with
// history, notifications, an index entry and name claim, long-term memory,
// a claim-checked large request, and (seeded) a parked request, trigger
// snapshot, status and parked commit — each holding marker.
func buildSession(t *testing.T, s *fullStack, session string) {
	t.Helper()
	var evs []map[string]any
	evs = append(evs, lifecycleEvent(session, "start", events.TypeSessionStarted, events.SessionStarted{UserID: "alice", MemoryPolicy: policy(true, false)}))
	for i := range 3 {
		evs = append(evs, workTurn(session, fmt.Sprint("w", i), fmt.Sprintf("%s step %d of the importer", marker, i))...)
	}
	postBatch(t, s.httpURL, evs)
	waitForNotes(t, s.js, session, lastSeq(t, s.js, session))
	evs = []map[string]any{bigRequest(session, "big", marker+"-BEGIN", 600<<10), said(session, "pref", "", marker+" I prefer short answers.")}
	evs = append(evs, workTurn(session, "w9", marker+" last step")...)
	postBatch(t, s.httpURL, evs)
	waitForNotes(t, s.js, session, lastSeq(t, s.js, session))
	postBatch(t, s.httpURL, []map[string]any{lifecycleEvent(session, "end", events.TypeSessionEnded, events.SessionEnded{})})
	ctx := context.Background()
	index, _ := s.js.KeyValue(ctx, events.BucketIndex)
	ltm, _ := s.js.KeyValue(ctx, events.BucketLTM)
	testpoll.Until(t, 30*time.Second, "the session is indexed with a name and alice has long-term memory", func() bool {
		e, err := index.Get(ctx, events.MemoryKey("default", session))
		var idx events.SessionIndex
		if err != nil || json.Unmarshal(e.Value(), &idx) != nil || idx.Name == "" {
			return false
		}
		if _, err := index.Get(ctx, "names.default."+idx.Name); err != nil {
			return false
		}
		keys, _ := ltm.ListKeysFiltered(ctx, "default.alice.>")
		n := 0
		for range keys.Keys() {
			n++
		}
		return n > 0
	})
	seedStates(t, s.js, session, marker)
}

// TestEraseSessionEverywhere: a session with everything is erased over
// HTTP; a walk of every stream and bucket (KV history, object chunks,
// Direct Get of the old sequences) finds no byte of its content, the
// receipt counts without content, a second erase removes nothing, and
// the session's events are refused with 410 while the tombstone lives.
func TestEraseSessionEverywhere(t *testing.T) {
	s := startFullStack(t)
	buildSession(t, s, "doomed")
	before := markerSeqs(t, s.js, marker)
	shard, _ := sessionStream(t, s.js, "default", "doomed")
	for _, want := range []string{shard.CachedInfo().Config.Name, "OBJ_" + events.BucketBlobs, "KV_" + events.BucketMemory,
		"KV_" + events.BucketParked, "KV_" + events.BucketTriggerState, "KV_" + events.BucketStatus, "KV_" + events.BucketLTMState, "KV_" + events.BucketLTM} {
		if len(before[want]) == 0 {
			t.Fatalf("the test session left nothing in %s: %v", want, before)
		}
	}
	if len(before["KV_"+events.BucketMemory]) < 2 {
		t.Fatalf("memory has %d revisions with the marker, want a history", len(before["KV_"+events.BucketMemory]))
	}
	checkExport(t, s, "doomed")

	r := eraseSession(t, s.httpURL, "doomed")
	b, _ := json.Marshal(r)
	if bytes.Contains(b, []byte(marker)) {
		t.Fatalf("the receipt holds content: %s", b)
	}
	for _, p := range []string{shard.CachedInfo().Config.Name, events.BucketMemory, events.BucketIndex, events.BucketBlobs, events.StreamEvents, events.BucketLTM} {
		if r.Count(p, "") == 0 {
			t.Errorf("the receipt removed nothing from %s: %s", p, b)
		}
	}
	announced, err := s.js.Stream(context.Background(), events.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	m, err := announced.GetLastMsgForSubject(context.Background(), events.EventsSubject(events.KindSessionErased, "default", "doomed"))
	var erased events.Erased
	if err != nil || json.Unmarshal(m.Data, &erased) != nil || erased.Session != "doomed" || erased.Total != r.Total || bytes.Contains(m.Data, []byte(marker)) {
		t.Fatalf("the erase announcement: %v %s", err, m.Data)
	}
	gone(t, s.js, before)
	if left := markerSeqs(t, s.js, marker); len(left) > 0 {
		t.Fatalf("the marker is still stored: %v", left)
	}
	if again := eraseSession(t, s.httpURL, "doomed"); again.Total != 0 {
		t.Errorf("a second erase removed %+v", again.Parts)
	}
	status, body := postOne(t, s.httpURL, said("doomed", "late", "", marker+" late"))
	if status != http.StatusGone || !strings.Contains(string(body), ingestsvc.ProblemGone) {
		t.Fatalf("an event after the erase: %d %s", status, body)
	}
	if left := markerSeqs(t, s.js, marker); len(left) > 0 {
		t.Fatalf("the marker is stored again: %v", left)
	}
}

// checkExport: the session's export round-trips through the importer
// (recall replay's reader) with every message, and its notes part holds
// the memory and the index entry.
func checkExport(t *testing.T, s *fullStack, session string) {
	t.Helper()
	status, body := call(t, "GET", s.httpURL+"/v1/sessions/"+session+"/export", nil)
	if status != http.StatusOK {
		t.Fatalf("export: %d %s", status, body)
	}
	res, err := importer.ClaudeCode(bytes.NewReader(body), importer.Options{Session: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Counts["user"] + res.Counts["assistant"] + res.Counts["tool_result"]; n != 18 || !bytes.Contains(body, []byte(marker+"-BEGIN")) {
		t.Errorf("the export imports %d messages (want 18; %v, warnings %v)", n, res.Counts, res.Warnings)
	}
	status, body = call(t, "GET", s.httpURL+"/v1/sessions/"+session+"/export?part=notes", nil)
	var notes export.Notes
	if status != http.StatusOK || json.Unmarshal(body, &notes) != nil || notes.Memory == nil || notes.Index == nil {
		t.Fatalf("export notes: %d %s", status, body)
	}
}

// TestEraseWhileEventsArrive: events keep arriving during the erase; once
// it answered they are refused, and what was accepted before is removed
// (the guard removes the late memory, status and notifications of the
// extractions that were running).
func TestEraseWhileEventsArrive(t *testing.T) {
	s := startFullStack(t)
	const session = "busy"
	postBatch(t, s.httpURL, workTurn(session, "w0", marker+" first"))
	var erased atomic.Bool
	var refused atomic.Int64
	var wg sync.WaitGroup
	ctx, stop := context.WithCancel(context.Background())
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			after := erased.Load()
			status, _ := postOne(t, s.httpURL, workTurn(session, fmt.Sprint("k", i), marker+" more")...)
			if status == http.StatusGone {
				refused.Add(1)
			} else if after {
				t.Errorf("an event posted after the erase answered: %d", status)
			}
		}
	}()
	testpoll.Until(t, 30*time.Second, "the session has memory", func() bool {
		mem, _ := s.js.KeyValue(ctx, events.BucketMemory)
		_, err := mem.Get(ctx, events.MemoryKey("default", session))
		return err == nil
	})
	eraseSession(t, s.httpURL, session)
	erased.Store(true)
	testpoll.Until(t, 20*time.Second, "events are refused", func() bool { return refused.Load() >= 3 })
	stop()
	wg.Wait()
	testpoll.Until(t, 30*time.Second, "no byte of the session is stored", func() bool { return len(markerSeqs(t, s.js, marker)) == 0 })
}

// TestEraseUser: DELETE /v1/users/alice?sessions=true removes alice's
// long-term memory and her sessions; the user export shows the memory
// before and 404 after.
func TestEraseUser(t *testing.T) {
	s := startFullStack(t)
	buildSession(t, s, "alices")
	status, body := call(t, "GET", s.httpURL+"/v1/users/alice/export", nil)
	var u export.UserExport
	if status != http.StatusOK || json.Unmarshal(body, &u) != nil || len(u.Documents) == 0 {
		t.Fatalf("user export: %d %s", status, body)
	}
	status, body = call(t, "DELETE", s.httpURL+"/v1/users/alice?sessions=true", nil)
	var r events.EraseReceipt
	if status != http.StatusOK || json.Unmarshal(body, &r) != nil || len(r.Sessions) != 1 || r.Sessions[0].Session != "alices" {
		t.Fatalf("DELETE /v1/users/alice: %d %s", status, body)
	}
	if left := markerSeqs(t, s.js, marker); len(left) > 0 {
		t.Fatalf("the marker is still stored: %v", left)
	}
	if status, _ := call(t, "GET", s.httpURL+"/v1/users/alice/export", nil); status != http.StatusNotFound {
		t.Errorf("user export after the erase: %d", status)
	}
}
