package extractorsvc

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/llm/llmtest"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// contextWindowBytes is the fake model's limit: a request body over it is
// refused as a real API refuses a prompt over its context window (400).
const contextWindowBytes = 600_000

// TestHugeToolResultReachesTheModelClipped stores a 900 KB tool result (a
// log read whole; NATS's default payload limit is 1 MB) in a session. Sent as is, it is over any model's context
// window and the session's memory would never advance; the model is shown
// its beginning and end, and the extraction commits.
func TestHugeToolResultReachesTheModelClipped(t *testing.T) {
	e := newEnv(t)
	fake := llmtest.NewAnthropic(t)
	fake.SetResponder(func(call int, body []byte) llmtest.Reply {
		if len(body) > contextWindowBytes {
			return llmtest.Reply{Status: 400}
		}
		return llmtest.AppendWorklog(call, body)
	})
	p := llm.NewAnthropic(llm.ClientOptions{APIKey: "test", BaseURL: fake.BaseURL(), Model: "test-model"})
	e.startWorker(t, testConfig("w1"), p)

	var log strings.Builder
	for i := 0; log.Len() < 900_000; i++ {
		fmt.Fprintf(&log, "2026-11-23T10:00:%02d line %d: request served\n", i%60, i)
	}
	log.WriteString("FATAL: disk full\n")
	msgs := []events.Message{
		{UUID: "u1", Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "why did the service stop?"}}},
		{UUID: "a1", Role: events.RoleAssistant, MessageID: "m1", StopReason: "tool_use", Content: events.Content{
			{Type: events.BlockToolUse, ID: "t1", Name: "Read", Input: []byte(`{"path":"/var/log/app.log"}`)}}},
		{UUID: "u2", Role: events.RoleUser, Content: events.Content{{Type: events.BlockToolResult, ToolUseID: "t1",
			Content: events.Content{{Type: events.BlockText, Text: log.String()}}}}},
		{UUID: "a2", Role: events.RoleAssistant, MessageID: "m2", StopReason: "end_turn", Content: events.Content{
			{Type: events.BlockText, Text: "The log ends with a disk-full error."}}},
	}
	var last uint64
	for _, m := range msgs {
		seq, err := e.tryAppend("acme", "s1", m)
		if err != nil {
			t.Fatal(err)
		}
		last = seq
	}
	e.request(t, "acme", "s1", last)
	testpoll.Until(t, 20*time.Second, "an outcome", func() bool { return len(e.completed())+len(e.failed()) > 0 })
	if f := e.failed(); len(f) > 0 {
		t.Fatalf("the extraction failed: %+v (%d model calls)", f[0], fake.Calls())
	}
	mem, _ := e.memory(t, "acme", "s1")
	if mem.CoveredSeq != last || mem.LastSummarizedSeq != last || !strings.Contains(mem.Notes, "- step") {
		t.Fatalf("memory %+v", mem)
	}
	body := string(fake.Requests()[0])
	for _, want := range []string{"why did the service stop?", "line 0: request served", "FATAL: disk full", "omitted by Recall", "disk-full error"} {
		if !strings.Contains(body, want) {
			t.Errorf("the model's request (%d bytes) lacks %q", len(body), want)
		}
	}
}

// TestBacklogWithoutEarlySafePointGoesInParts summarizes a backlog whose
// first half-cap holds no safe point: one streamed response of many
// records. No part may split the response, and the part holding it ends
// at the first safe point after it rather than the backlog going to the
// model whole.
func TestBacklogWithoutEarlySafePointGoesInParts(t *testing.T) {
	e := newEnv(t)
	rec, _ := e.startRecordedWorker(t, 80)
	add := func(m events.Message) uint64 {
		seq, err := e.tryAppend("acme", "s1", m)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	add(events.Message{UUID: "p", Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "write the release notes"}}})
	var streamEnd uint64
	for i := range 20 {
		streamEnd = add(events.Message{UUID: fmt.Sprintf("s%d", i), Role: events.RoleAssistant, MessageID: "long",
			Content: events.Content{{Type: events.BlockText, Text: fmt.Sprintf("streamed paragraph %d", i)}}})
	}
	var last uint64
	for i := range 20 {
		role, mid := events.RoleUser, ""
		if i%2 == 1 {
			role, mid = events.RoleAssistant, fmt.Sprintf("r%d", i)
		}
		last = add(events.Message{UUID: fmt.Sprintf("m%d", i), Role: role, MessageID: mid,
			Content: events.Content{{Type: events.BlockText, Text: fmt.Sprintf("later message %d", i)}}})
	}
	e.request(t, "acme", "s1", last)
	testpoll.Until(t, 20*time.Second, "the extraction", func() bool { return len(e.completed()) == 1 })
	mem, _ := e.memory(t, "acme", "s1")
	if mem.CoveredSeq != last || mem.LastSummarizedSeq != last {
		t.Fatalf("memory %+v, want covered and summarized up to %d", mem, last)
	}
	convs := rec.all()
	if len(convs) < 2 {
		t.Fatalf("%d model call for a backlog over the cap: it went whole", len(convs))
	}
	ended := false
	for i, c := range convs {
		if strings.Contains(c, "streamed paragraph") && !strings.Contains(c, "streamed paragraph 19") {
			t.Fatalf("part %d splits the streamed response:\n%s", i, c)
		}
		if strings.Contains(c, "streamed paragraph 19") && !strings.Contains(c, "later message 19") {
			ended = true // a part ended at the safe point after the response (seq streamEnd)
		}
	}
	if ended {
		return
	}
	t.Fatalf("no part ended after the streamed response (seq %d); the parts:\n%s", streamEnd, strings.Join(convs, "\n---\n"))
}

// TestRaisedCapWidensTheWindow: a window cut under a small conversation cap
// does not keep a worker with a larger cap from showing the model more; the
// next extraction reads the session from its first record again.
func TestRaisedCapWidensTheWindow(t *testing.T) {
	e := newEnv(t)
	rec := &convRecorder{}
	p := rec.provider()
	small := testConfig("w1")
	small.MaxConversationTokens = 80
	wk := e.startWorker(t, small, p)
	_, cut := e.cutWindow(t)
	if cut.ContextTokens != 80 {
		t.Fatalf("window cut under a cap of 80 tokens says context_tokens %d", cut.ContextTokens)
	}
	wk.stop(t)

	e.startWorker(t, testConfig("w2"), p) // the default cap, 150,000 tokens
	more := e.appendMessages(t, "acme", "s1", 2)
	e.request(t, "acme", "s1", more[1])
	testpoll.Until(t, 10*time.Second, "the third extraction", func() bool { return len(e.completed()) == 3 })
	convs := rec.all()
	if last := convs[len(convs)-1]; !strings.Contains(last, `"user message 0"`) {
		t.Fatalf("with the cap raised the model still saw only the old window (from seq %d):\n%s", cut.ContextSeq, last)
	}
	if wide, _ := e.memory(t, "acme", "s1"); wide.ContextSeq != 0 || wide.ContextTokens != 150000 {
		t.Fatalf("after the wide extraction: context_seq %d, context_tokens %d; want 0 and 150000", wide.ContextSeq, wide.ContextTokens)
	}
}
