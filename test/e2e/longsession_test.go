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
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// keepMax is the pipeline compactor's keep-window maximum (the default).
const keepMax = 40000

// toolLoopTranscript writes a Claude Code JSONL transcript of the shape
// agents produce most: the user asks once, then the agent runs a long tool
// loop, each call returning about 8,000 characters. It returns the
// transcript and the request's text.
func toolLoopTranscript(session string, calls int) ([]byte, string) {
	return toolLoopJSONL(session, calls, false)
}

// toolLoopJSONL is toolLoopTranscript; streamed writes each response as
// Claude Code streams it: a thinking record, then the tool_use record,
// sharing the message id (stop_reason on the last).
func toolLoopJSONL(session string, calls int, streamed bool) ([]byte, string) {
	var b bytes.Buffer
	request := fmt.Sprintf("Migrate every handler in services/ to the v2 router, run the tests after each file, and stop at the first failure that is not flaky (session %s).", session)
	at := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	parent := ""
	write := func(typ, uuid string, msg map[string]any) {
		at = at.Add(2 * time.Second)
		rec := map[string]any{"type": typ, "uuid": uuid, "sessionId": session, "timestamp": at.Format(time.RFC3339Nano), "message": msg}
		if parent != "" {
			rec["parentUuid"] = parent
		}
		parent = uuid
		line, _ := json.Marshal(rec)
		b.Write(append(line, '\n'))
	}
	write("user", session+"-req", map[string]any{"role": "user", "content": request})
	context := int64(3000)
	for i := range calls {
		id := fmt.Sprintf("toolu_%s_%d", session, i)
		context += 60
		if streamed {
			write("assistant", fmt.Sprintf("%s-t%d", session, i), map[string]any{
				"id": fmt.Sprintf("msg_%s_%d", session, i), "role": "assistant", "model": "claude-sonnet-4-5",
				"stop_reason": nil, "usage": map[string]int64{"input_tokens": context, "output_tokens": 20},
				"content": []map[string]any{{"type": "thinking", "thinking": fmt.Sprintf("Handler %03d next; run its tests.", i), "signature": "sig"}},
			})
		}
		write("assistant", fmt.Sprintf("%s-a%d", session, i), map[string]any{
			"id": fmt.Sprintf("msg_%s_%d", session, i), "role": "assistant", "model": "claude-sonnet-4-5",
			"stop_reason": "tool_use", "usage": map[string]int64{"input_tokens": context, "output_tokens": 60},
			"content": []map[string]any{{"type": "tool_use", "id": id, "name": "Bash",
				"input": map[string]string{"command": fmt.Sprintf("go test ./services/handler%03d/...", i)}}},
		})
		var out strings.Builder
		for line := 0; out.Len() < 8000; line++ {
			fmt.Fprintf(&out, "=== RUN   TestHandler%03d/case_%03d\n--- PASS: TestHandler%03d/case_%03d (0.%02ds)\n", i, line, i, line, line%100)
		}
		context += int64(out.Len() / 4)
		write("user", fmt.Sprintf("%s-r%d", session, i), map[string]any{"role": "user",
			"content": []map[string]any{{"type": "tool_result", "tool_use_id": id, "content": out.String()}}})
	}
	return b.Bytes(), request
}

// postEvents publishes events through the HTTP edge in batches.
func postEvents(t *testing.T, url string, evs []event.Event) {
	t.Helper()
	for len(evs) > 0 {
		n := min(len(evs), 100)
		body, err := json.Marshal(evs[:n])
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(url+"/v1/events", "application/cloudevents-batch+json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("ingest answered %d: %s", resp.StatusCode, msg)
		}
		evs = evs[n:]
	}
}

// compactHTTP asks the HTTP edge for a compaction, waiting up to 15 s for a
// running extraction.
func compactHTTP(t *testing.T, url, session string) *events.CompactReply {
	t.Helper()
	return compactWith(t, url, session, `{"wait_timeout_ms": 15000}`)
}

// compactedOnce replays a 30-call tool loop as session, waits for its notes,
// compacts it once (served) and returns the notes and the
// dev.recall.session.compacted event the platform then reports.
func compactedOnce(t *testing.T, p *pipeline, js jetstream.JetStream, session string) (events.MemoryRecord, map[string]any) {
	t.Helper()
	jsonl, _ := toolLoopTranscript(session, 30)
	res, err := importer.ClaudeCode(bytes.NewReader(jsonl), importer.Options{Session: session})
	if err != nil {
		t.Fatal(err)
	}
	postEvents(t, p.httpURL, res.Events)
	rec := waitForNotes(t, js, session, lastSeq(t, js, session)-6)
	first := compactHTTP(t, p.httpURL, session)
	if !first.Served || first.Boundary.PreservedSegment == nil {
		t.Fatalf("first compaction: %q (%s)", first.Outcome, first.Reason)
	}
	ps := first.Boundary.PreservedSegment
	return rec, eventtest.Map(e2eSession(session).Compacted("compacted-1", events.SessionCompacted{Trigger: "auto",
		PreTokens: first.TokensBefore, PostTokens: first.TokensAfter, FirstKeptUUID: ps.HeadUUID, LastKeptUUID: ps.TailUUID}))
}

// waitForNotes waits until the session's notes cover a record at or after
// seq and no extraction of the session is running.
func waitForNotes(t *testing.T, js jetstream.JetStream, session string, seq uint64) events.MemoryRecord {
	t.Helper()
	ctx := context.Background()
	mem, err := js.KeyValue(ctx, events.BucketMemory)
	if err != nil {
		t.Fatal(err)
	}
	status, err := js.KeyValue(ctx, events.BucketStatus)
	if err != nil {
		t.Fatal(err)
	}
	key := events.MemoryKey("default", session)
	var rec events.MemoryRecord
	testpoll.Until(t, 90*time.Second, fmt.Sprintf("the notes of %s covering seq %d, no extraction running", session, seq), func() bool {
		e, err := mem.Get(ctx, key)
		if err != nil || json.Unmarshal(e.Value(), &rec) != nil || rec.CoveredSeq < seq {
			return false
		}
		_, err = status.Get(ctx, key) // an extraction is running while its status is there
		return err != nil
	})
	return rec
}

// context is the new context a reply describes: the summary's text and the
// kept messages.
type replyContext struct {
	summary string
	kept    []events.Message
	seqs    []uint64
}

func contextOf(t *testing.T, r *events.CompactReply) replyContext {
	t.Helper()
	c := replyContext{summary: r.Summary.Content[0].Text}
	for _, e := range r.Kept {
		var m events.Message
		if err := json.Unmarshal(e.Data(), &m); err != nil {
			t.Fatal(err)
		}
		var seq uint64
		fmt.Sscan(fmt.Sprint(e.Extensions()[events.ExtSeq]), &seq)
		c.kept, c.seqs = append(c.kept, m), append(c.seqs, seq)
	}
	return c
}

// checkPairs fails when a kept tool_result has no kept tool_use.
func (c replyContext) checkPairs(t *testing.T) {
	t.Helper()
	uses := map[string]bool{}
	for _, m := range c.kept {
		for _, b := range m.Content {
			switch b.Type {
			case events.BlockToolUse:
				uses[b.ID] = true
			case events.BlockToolResult:
				if !uses[b.ToolUseID] {
					t.Fatalf("kept tool_result %s without its tool_use", b.ToolUseID)
				}
			}
		}
	}
}

func (c replyContext) tokens() int64 {
	var n int64
	for i := range c.kept {
		n += memory.EstimateMessage(&c.kept[i])
	}
	return memory.Padded(n)
}

// TestLongToolLoopsCompactFromMemory replays tool-loop transcripts of 20,
// 60, 100 and 200 calls of about 8,000 characters through the real
// services, waits for the trigger's extractions and compacts: every one is
// served from memory, the kept messages fit the keep window, the latest
// request is in the new context verbatim, no tool_result is kept without its
// tool_use, and the context ends smaller than it started.
func TestLongToolLoopsCompactFromMemory(t *testing.T) {
	p, srv := startPipeline(t)
	_, js := srv.Connect(t)
	for _, tc := range []struct {
		calls    int
		streamed bool
	}{{20, false}, {60, false}, {100, false}, {200, false}, {100, true}} {
		calls := tc.calls
		session := fmt.Sprintf("loop%d", calls)
		if tc.streamed {
			session += "streamed"
		}
		t.Run(session, func(t *testing.T) {
			jsonl, request := toolLoopJSONL(session, calls, tc.streamed)
			res, err := importer.ClaudeCode(bytes.NewReader(jsonl), importer.Options{Session: session})
			if err != nil {
				t.Fatal(err)
			}
			postEvents(t, p.httpURL, res.Events)
			ts, subject := sessionStream(t, js, "default", session)
			last, err := ts.GetLastMsgForSubject(context.Background(), subject)
			if err != nil {
				t.Fatal(err)
			}
			// The trigger extracts every 3 tool calls: the last decision is
			// at most three calls (six records, nine when streamed) from
			// the end.
			waitForNotes(t, js, session, last.Sequence-9)

			r := compactHTTP(t, p.httpURL, session)
			if r.Outcome != memory.OutcomeSessionMemory || !r.Served {
				t.Fatalf("outcome %q (%s)", r.Outcome, r.Reason)
			}
			c := contextOf(t, r)
			if got := c.tokens(); got > keepMax {
				t.Fatalf("kept %d tokens, over the keep window's %d", got, keepMax)
			}
			if !strings.Contains(c.summary, request) && (len(c.kept) == 0 || memory.RequestText(&c.kept[0]) != request) {
				t.Fatalf("the latest request is not in the new context verbatim")
			}
			if !strings.Contains(c.summary, request) {
				t.Logf("request kept verbatim")
			}
			c.checkPairs(t)
			if r.TokensAfter >= r.TokensBefore {
				t.Fatalf("tokens %d -> %d: the context did not shrink", r.TokensBefore, r.TokensAfter)
			}
			t.Logf("%d calls: %s, kept %d messages (%d tokens), tokens %d -> %d", calls, r.Outcome, r.KeptCount, c.tokens(), r.TokensBefore, r.TokensAfter)
		})
	}
}

// TestRepeatedCompactionKeepsEveryRecord: compact, report the compaction
// (session.compacted with the preserved segment), five more turns with no
// extraction in between, compact again: every record after the notes'
// coverage is in the new context.
func TestRepeatedCompactionKeepsEveryRecord(t *testing.T) {
	p, srv := startPipeline(t)
	_, js := srv.Connect(t)
	const session = "again"
	rec, compacted := compactedOnce(t, p, js, session)
	ts, subject := sessionStream(t, js, "default", session)
	batch := []map[string]any{compacted}
	// Five short turns: too little growth for the trigger to extract.
	for i := range 5 {
		batch = append(batch,
			message(session, fmt.Sprintf("u-more-%d", i), events.RoleUser, "", events.Block{Type: events.BlockText, Text: fmt.Sprintf("ok %d", i)}),
			message(session, fmt.Sprintf("a-more-%d", i), events.RoleAssistant, "end_turn", events.Block{Type: events.BlockText, Text: "done"}))
	}
	body, _ := json.Marshal(batch)
	resp, err := http.Post(p.httpURL+"/v1/events", "application/cloudevents-batch+json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	second := compactHTTP(t, p.httpURL, session)
	if second.Outcome != memory.OutcomeSessionMemory {
		t.Fatalf("second compaction: %q (%s)", second.Outcome, second.Reason)
	}
	if second.LastSummarizedSeq != rec.LastSummarizedSeq {
		t.Fatalf("an extraction ran between the compactions (%d -> %d); the test needs none", rec.LastSummarizedSeq, second.LastSummarizedSeq)
	}
	c := contextOf(t, second)
	c.checkPairs(t)
	kept := map[string]bool{}
	for _, m := range c.kept {
		kept[m.UUID] = true
	}
	// Every message stored after the last summarized record is kept.
	ctx := context.Background()
	cons, err := ts.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq: second.LastSummarizedSeq + 1})
	if err != nil {
		t.Fatal(err)
	}
	missing := 0
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			break
		}
		if m.Headers().Get("ce-type") != events.TypeMessage {
			continue
		}
		var msg events.Message
		if err := json.Unmarshal(m.Data(), &msg); err != nil {
			t.Fatal(err)
		}
		if !kept[msg.UUID] {
			missing++
			t.Errorf("record %s after the notes' coverage is missing from the second compaction", msg.UUID)
		}
	}
	if missing == 0 && !kept["u-more-4"] {
		t.Fatal("the turns after the first compaction were not read")
	}
}
