package memory

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/recallhq/recall/pkg/events"
)

// script builds a session's records; every helper appends one record with
// the next sequence and a stream time 100ms after the previous one.
type script struct {
	recs []TriggerRecord
	t    int64
}

func (s *script) add(r TriggerRecord) *script {
	r.Seq = uint64(len(s.recs) + 1)
	s.t += int64(100 * time.Millisecond)
	if r.Time == 0 {
		r.Time = s.t
	} else {
		s.t = r.Time
	}
	if r.UUID == "" {
		r.UUID = fmt.Sprintf("u%d", r.Seq)
	}
	s.recs = append(s.recs, r)
	return s
}

// user appends a main-thread user record worth est tokens.
func (s *script) user(est int64) *script {
	return s.add(TriggerRecord{Kind: RecMessage, Main: true, Estimate: est})
}

// asst appends a one-record assistant response (stop_reason set).
func (s *script) asst(id string, est int64, tools int, usage int64) *script {
	return s.add(TriggerRecord{Kind: RecMessage, Main: true, Assistant: true, MessageID: id, Estimate: est,
		ToolUses: tools, StopReason: true, HasUsage: usage > 0, UsageTotal: usage})
}

// part appends one streamed record of response id without stop_reason.
func (s *script) part(id string, est int64, tools int, usage int64) *script {
	return s.add(TriggerRecord{Kind: RecMessage, Main: true, Assistant: true, MessageID: id, Estimate: est,
		ToolUses: tools, HasUsage: usage > 0, UsageTotal: usage})
}

func (s *script) sub(est int64, tools int) *script {
	return s.add(TriggerRecord{Kind: RecMessage, Main: false, Assistant: true, MessageID: "sub", Estimate: est, ToolUses: tools, StopReason: true})
}

func (s *script) compacting() *script { return s.add(TriggerRecord{Kind: RecCompacting}) }
func (s *script) compacted(post int64) *script {
	return s.add(TriggerRecord{Kind: RecCompacted, PostTokens: post})
}

// run feeds every record and completes a trailing response by quiet period.
func run(recs []TriggerRecord, th Thresholds) ([]TriggerDecision, *TriggerState) {
	var st TriggerState
	var out []TriggerDecision
	for _, r := range recs {
		out = st.Observe(r, &th, out)
	}
	out = st.CompleteQuiet(&th, out)
	return out, &st
}

func seqs(ds []TriggerDecision) []uint64 {
	out := []uint64{}
	for _, d := range ds {
		out = append(out, d.UpToSeq)
	}
	return out
}

func TestTriggerClauses(t *testing.T) {
	def := DefaultThresholds()
	tests := []struct {
		name      string
		s         *script
		th        Thresholds
		want      []uint64
		timeBased bool // the outcome rests on the quiet period
	}{
		{
			name: "below init threshold nothing fires",
			s:    new(script).user(4000).asst("a", 4000, 0, 0).user(1000).asst("b", 900, 0, 0),
			th:   def, want: []uint64{},
		},
		{
			name: "init threshold reached at a natural break fires",
			s:    new(script).user(6000).asst("a", 4100, 0, 0),
			th:   def, want: []uint64{2},
		},
		{
			name: "tokens without tool calls: a tool-using turn with fewer than 3 calls does not fire",
			s:    new(script).user(12000).asst("a", 100, 2, 0),
			th:   def, want: []uint64{},
		},
		{
			name: "tokens with 3 tool calls fires inside a tool loop",
			s:    new(script).user(12000).asst("a", 100, 2, 0).user(50).asst("b", 100, 1, 0),
			th:   def, want: []uint64{4},
		},
		{
			name: "tool calls without tokens never fire",
			s: new(script).user(12000).asst("a", 100, 0, 0). // init + first extraction
										user(100).asst("b", 100, 5, 0).user(100).asst("c", 100, 5, 0).user(100).asst("d", 100, 0, 0),
			th: def, want: []uint64{2},
		},
		{
			name: "natural break with token growth fires without tool calls",
			s:    new(script).user(12000).asst("a", 100, 0, 0).user(5000).asst("b", 10, 0, 0),
			th:   def, want: []uint64{2, 4},
		},
		{
			name: "growth just below the update threshold does not fire",
			s:    new(script).user(12000).asst("a", 100, 0, 0).user(4880).asst("b", 10, 0, 0),
			th:   def, want: []uint64{2},
		},
		{
			name: "subagent messages are ignored",
			s:    new(script).user(3000).sub(50000, 10).asst("a", 100, 0, 0).sub(50000, 10),
			th:   def, want: []uint64{},
		},
		{
			name: "streamed response sharing message_id is one response: no natural break at its first record",
			// thinking, text, tool_use records; the response has a tool call,
			// so it is no natural break and only 1 tool call was made.
			s:  new(script).user(12000).part("r", 50, 0, 0).part("r", 50, 0, 0).part("r", 50, 1, 0).user(10),
			th: def, want: []uint64{},
		},
		{
			name: "streamed response completes at stop_reason with its last record as up_to",
			s:    new(script).user(12000).part("r", 50, 0, 0).part("r", 50, 0, 0).asst("r", 50, 0, 0),
			th:   def, want: []uint64{4},
		},
		{
			name: "streamed response completes when the next record arrives",
			s:    new(script).user(12000).part("r", 50, 0, 0).part("r", 50, 0, 0).user(10),
			th:   def, want: []uint64{3},
		},
		{
			name: "usage missing entirely: everything is estimated",
			s:    new(script).user(9000).part("r", 500, 0, 0).part("r", 500, 0, 0),
			th:   def, want: []uint64{3}, timeBased: true,
		},
		{
			name: "real usage replaces the estimate of everything before the response",
			// 20000 estimated, but the API says the context is 3000 tokens.
			s:  new(script).user(20000).asst("a", 100, 0, 3000),
			th: def, want: []uint64{},
		},
		{
			name: "later records count on top of the latest usage",
			s:    new(script).user(20000).asst("a", 100, 0, 3000).user(7000).asst("b", 10, 0, 0),
			th:   def, want: []uint64{4},
		},
		{
			name: "compacting suppresses decisions until compacted",
			s:    new(script).user(12000).compacting().asst("a", 100, 0, 0).compacted(2000),
			th:   def, want: []uint64{},
		},
		{
			name: "assistant record without message_id is a complete response",
			s:    new(script).user(12000).add(TriggerRecord{Kind: RecMessage, Main: true, Assistant: true, Estimate: 10}),
			th:   def, want: []uint64{2},
		},
		{
			// A platform that never sends stop_reason: the quiet period is
			// all that says a response ended. The late record is counted
			// but makes no second evaluation.
			name: "without stop_reason, a quiet gap completes a response once",
			s: new(script).user(12000).part("r", 50, 0, 0).
				add(TriggerRecord{Kind: RecMessage, Main: true, Assistant: true, MessageID: "r", Estimate: 4000, ToolUses: 1, Time: int64(time.Hour)}).
				user(10).part("r2", 10, 0, 0),
			th: def, want: []uint64{2}, timeBased: true,
		},
		{
			// A long Write streamed slowly: minutes between the text and the
			// tool_use of one response. The session sends stop_reason, so
			// the gap does not end the response, and a response that ends
			// in tool_use is not a natural break: with 1 tool call (< 3)
			// there is no decision until the next response completes.
			name: "a slow stream is one response, and ends in tool_use",
			s: new(script).user(100).asst("a", 10, 0, 0).user(12000).part("r", 50, 0, 0).
				add(TriggerRecord{Kind: RecMessage, Main: true, Assistant: true, MessageID: "r", Estimate: 5000, ToolUses: 1, StopReason: true, Time: int64(10 * time.Minute)}).
				user(10).asst("b", 10, 0, 0),
			th: def, want: []uint64{7},
		},
		{
			name: "a response with tool_use is never completed by time",
			s: new(script).user(100).part("x", 10, 0, 0).user(12000).part("r", 50, 1, 0).
				add(TriggerRecord{Kind: RecMessage, Main: true, Assistant: true, MessageID: "r", Estimate: 10, ToolUses: 1, Time: int64(time.Hour)}).
				user(10).part("r2", 10, 0, 0),
			th: def, want: []uint64{7}, timeBased: true,
		},
		{
			name: "a late record of an evaluated response is not evaluated again",
			s:    new(script).user(12000).asst("r", 50, 0, 0).part("r", 6000, 0, 0).user(10).asst("b", 10, 0, 0),
			th:   def, want: []uint64{2, 5},
		},
		{
			name: "every number is configurable",
			s:    new(script).user(600).asst("a", 10, 1, 0).user(10).asst("b", 10, 1, 0).user(300).asst("c", 10, 1, 0),
			th:   Thresholds{MinimumMessageTokensToInit: 500, MinimumTokensBetweenUpdate: 200, ToolCallsBetweenUpdates: 1, QuietPeriod: time.Second},
			want: []uint64{2, 6},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := run(tt.s.recs, tt.th)
			if g := seqs(got); !reflect.DeepEqual(g, tt.want) {
				t.Fatalf("decisions at %v, want %v (%+v)", g, tt.want, got)
			}
			// The reference, read literally, agrees (it has no clock: only
			// sessions that send stop_reason compare).
			if tt.timeBased {
				return
			}
			if ref := seqs(referenceDecisions(tt.s.recs, tt.th)); !reflect.DeepEqual(ref, tt.want) {
				t.Fatalf("literal reference decides at %v, want %v", ref, tt.want)
			}
		})
	}
}

// TestTriggerSeed000Timeline replays the timeline of seed 000 ("Timeline
// Visualization"): a first check at [2] with ~2000 tokens is skipped, then
// extractions fire at [9] and [16] with 5000+ tokens and 10+ tool calls each,
// up to msg[9] and msg[16]. The seed documents v2.1.7, whose config was
// 5000/5000/10.
func TestTriggerSeed000Timeline(t *testing.T) {
	s := new(script)
	s.user(1500).asst("m2", 500, 0, 0)  // [1] [2]: 2000 tokens, skip
	s.user(300)                         // [3]
	s.asst("m4", 200, 5, 0).user(800)   // [4] [5] tools
	s.asst("m6", 200, 5, 0).user(800)   // [6] [7]
	s.user(100).asst("m9", 1500, 0, 0)  // [8] [9]: ~5400 tokens, 10 tool calls
	s.user(300)                         // [10]
	s.asst("m11", 200, 5, 0).user(1500) // [11] [12]
	s.asst("m13", 200, 5, 0).user(1500) // [13] [14]
	s.user(100).asst("m16", 1600, 0, 0) // [15] [16]
	s.user(100)                         // [17]
	th := Thresholds{MinimumMessageTokensToInit: 5000, MinimumTokensBetweenUpdate: 5000, ToolCallsBetweenUpdates: 10}
	got, st := run(s.recs, th)
	if g := seqs(got); !reflect.DeepEqual(g, []uint64{9, 16}) {
		t.Fatalf("decisions at %v, want [9 16]: %+v", g, got)
	}
	for i, d := range got {
		if d.Counters.ToolCallsSince < 10 || d.Counters.Tokens-d.Counters.TokensAtLastExtract < 5000 {
			t.Errorf("decision %d counters %+v: want 10+ tool calls and 5000+ tokens of growth", i, d.Counters)
		}
		if d.UpToID != fmt.Sprintf("u%d", d.UpToSeq) {
			t.Errorf("decision %d up_to_id %q, want the uuid of record %d", i, d.UpToID, d.UpToSeq)
		}
	}
	if st.Extractions() != 2 || st.LastExtractSeq() != 16 {
		t.Fatalf("state: %d extractions, last at %d", st.Extractions(), st.LastExtractSeq())
	}
	// With today's reference defaults (10000/5000/3) the first extraction
	// waits for the 10000-token init threshold, reached at [16].
	if got, _ := run(s.recs, DefaultThresholds()); !reflect.DeepEqual(seqs(got), []uint64{16}) {
		t.Fatalf("defaults: decisions %v, want [16]", seqs(got))
	}
}

// TestTriggerCompactionResetsBaseline is the fix of the reference defect: a
// compaction shrinks the context, and the reference keeps comparing against
// the pre-compaction baseline, so no update fires again until the context
// regrows past it (which auto-compaction prevents).
func TestTriggerCompactionResetsBaseline(t *testing.T) {
	s := new(script)
	s.user(150000).asst("a", 100, 0, 0) // extraction at ~150k tokens
	s.compacting().compacted(30000)
	for i := 0; i < 20; i++ { // 20 natural-break turns of 3000 tokens each
		s.user(2990).asst(fmt.Sprintf("b%d", i), 10, 0, 0)
	}
	fixed, st := run(s.recs, DefaultThresholds())
	if len(fixed) < 10 {
		t.Fatalf("after compaction: %d decisions, want updates every ~5000 tokens (%v)", len(fixed), seqs(fixed))
	}
	if d := fixed[1]; d.Counters.TokensAtLastExtract != 30000 {
		t.Fatalf("first update after compaction measured growth from %d, want the post-compaction size 30000", d.Counters.TokensAtLastExtract)
	}
	if st.Tokens() != 30000+20*3000 {
		t.Fatalf("token count %d, want post_tokens plus what followed (%d)", st.Tokens(), 30000+20*3000)
	}

	compat := DefaultThresholds()
	compat.ReferenceCompat = true
	ref, _ := run(s.recs, compat)
	if len(ref) != 1 {
		t.Fatalf("reference behaviour: %d decisions, want only the pre-compaction one (stall): %v", len(ref), seqs(ref))
	}
	// The literal reference stalls the same way.
	if lit := referenceDecisions(s.recs, compat); len(lit) != 1 {
		t.Fatalf("literal reference: %d decisions, want 1", len(lit))
	}
}

func TestTriggerInitIsSticky(t *testing.T) {
	s := new(script).user(12000).asst("a", 10, 0, 0).compacted(1000).user(5000).asst("b", 10, 0, 0)
	got, st := run(s.recs, DefaultThresholds())
	if g := seqs(got); !reflect.DeepEqual(g, []uint64{2, 5}) {
		t.Fatalf("decisions %v, want [2 5]: once initialized, a context below the init threshold still updates", g)
	}
	if !st.Initialized() {
		t.Fatal("not initialized")
	}
}

func TestTriggerRedeliveryIgnored(t *testing.T) {
	s := new(script).user(12000).asst("a", 10, 3, 0).user(3000).asst("b", 10, 3, 0).user(3000).asst("c", 10, 0, 0)
	th := DefaultThresholds()
	want, wantSt := run(s.recs, th)
	var st TriggerState
	var got []TriggerDecision
	for i, r := range s.recs {
		got = st.Observe(r, &th, got)
		for _, old := range s.recs[:i+1] { // redeliver everything seen so far
			got = st.Observe(old, &th, got)
		}
	}
	got = st.CompleteQuiet(&th, got)
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(&st, wantSt) {
		t.Fatalf("with redeliveries: %+v, want %+v", got, want)
	}
}

func TestMessageRecordCountsStringContent(t *testing.T) {
	var m events.Message
	if err := json.Unmarshal([]byte(`{"uuid":"x","role":"user","content":"`+string(make([]byte, 0))+`abcdefghijklmnop"}`), &m); err != nil {
		t.Fatal(err)
	}
	r := MessageRecord(7, 1, &m)
	if r.Estimate != 4 || !r.Main || r.Assistant || r.Seq != 7 {
		t.Fatalf("record %+v: string content of 16 chars must estimate 4 tokens", r)
	}
	m = events.Message{UUID: "y", Role: events.RoleAssistant, MessageID: "m", StopReason: "end_turn", QuerySource: events.QuerySubagent,
		Usage:   &events.Usage{InputTokens: 1, OutputTokens: 2, CacheCreationInputTokens: 3, CacheReadInputTokens: 4},
		Content: events.Content{{Type: events.BlockToolUse, Name: "Bash", Input: json.RawMessage(`{"a":1}`)}, {Type: events.BlockToolUse, Name: "X"}}}
	r = MessageRecord(8, 1, &m)
	if r.Main || !r.Assistant || !r.StopReason || r.UsageTotal != 10 || !r.HasUsage || r.ToolUses != 2 || r.MessageID != "m" {
		t.Fatalf("record %+v", r)
	}
}

func TestTriggerStateSize(t *testing.T) {
	var st TriggerState
	th := DefaultThresholds()
	st.Observe(TriggerRecord{Seq: 1, Kind: RecMessage, Main: true, Assistant: true, MessageID: "m", UUID: "0b7a4c1e-2f59-4d7e-9d1a-3c5e8f0a1b2c"}, &th, nil)
	if n := st.Size(); n > 256 {
		t.Fatalf("state of a session with a pending response is %d bytes, want <= 256", n)
	}
}

// TestTriggerMatchesLiteralReference generates long random transcripts and
// checks that the incremental state machine decides exactly where the
// reference's shouldExtractMemory, evaluated literally over the message list
// at every response completion, decides.
func TestTriggerMatchesLiteralReference(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		recs := randomTranscript(rng, 400)
		ths := []Thresholds{
			DefaultThresholds(),
			{MinimumMessageTokensToInit: 3000, MinimumTokensBetweenUpdate: 1500, ToolCallsBetweenUpdates: 2, QuietPeriod: 2 * time.Second},
			{MinimumMessageTokensToInit: 3000, MinimumTokensBetweenUpdate: 1500, ToolCallsBetweenUpdates: 2, QuietPeriod: 2 * time.Second, ReferenceCompat: true},
		}
		for i, th := range ths {
			got, _ := run(recs, th)
			want := referenceDecisions(recs, th)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d thresholds %d: state machine decided\n%+v\nliteral reference\n%+v", seed, i, got, want)
			}
			if i == 1 && len(got) < 5 {
				t.Fatalf("seed %d: only %d decisions; the generator is too weak to test anything", seed, len(got))
			}
		}
	}
}

// referenceDecisions evaluates the reference literally: once per
// main-thread response (records sharing a message_id), when it is complete
// (found by looking ahead, not incrementally: its record with stop_reason,
// or the next main-thread record is not one of its records), it calls
// shouldExtractMemory with the message list up to and including the
// response. Time plays no part: the generator's sessions send stop_reason,
// so the quiet period never applies to them. A compaction replaces the platform's context: it is modelled as
// a synthetic record carrying the post-compaction size as usage.
func referenceDecisions(recs []TriggerRecord, th Thresholds) []TriggerDecision {
	type msg struct {
		rec       TriggerRecord
		synthetic bool
	}
	var (
		msgs        []msg
		out         []TriggerDecision
		initialized bool
		baseline    int64
		lastUUID    string
		compacting  bool
		respStart   = -1 // index in msgs of the pending response's first record
		evaluated   = map[string]bool{}
	)
	mainIdx := []int{} // indices of records that matter to the main thread
	for i, r := range recs {
		if r.Kind != RecMessage || r.Main {
			mainIdx = append(mainIdx, i)
		}
	}
	tokens := func() int64 {
		for i := len(msgs) - 1; i >= 0; i-- {
			m := msgs[i]
			if !m.rec.Assistant || !m.rec.HasUsage {
				continue
			}
			if m.rec.MessageID != "" {
				for j := i - 1; j >= 0; j-- {
					pid := ""
					if msgs[j].rec.Assistant {
						pid = msgs[j].rec.MessageID
					}
					if pid == m.rec.MessageID {
						i = j
					} else if pid != "" {
						break
					}
				}
			}
			n := m.rec.UsageTotal
			for _, x := range msgs[i+1:] {
				n += x.rec.Estimate
			}
			return n
		}
		var n int64
		for _, x := range msgs {
			n += x.rec.Estimate
		}
		return n
	}
	hook := func() { // shouldExtractMemory(messages)
		start := respStart
		respStart = -1
		if compacting {
			return
		}
		cur := tokens()
		if !initialized {
			if cur < th.MinimumMessageTokensToInit {
				return
			}
			initialized = true
		}
		hasTokens := cur-baseline >= th.MinimumTokensBetweenUpdate
		calls, found := 0, lastUUID == ""
		for _, m := range msgs {
			if !found {
				found = m.rec.UUID == lastUUID
				continue
			}
			if m.rec.Assistant && !m.synthetic {
				calls += m.rec.ToolUses
			}
		}
		last := msgs[len(msgs)-1].rec
		toolsInTurn := last.ToolUses > 0
		if !th.ReferenceCompat {
			toolsInTurn = false
			for _, m := range msgs[start:] {
				toolsInTurn = toolsInTurn || (m.rec.Assistant && m.rec.ToolUses > 0)
			}
		}
		if hasTokens && (calls >= th.ToolCallsBetweenUpdates || !toolsInTurn) {
			out = append(out, TriggerDecision{UpToSeq: last.Seq, UpToID: last.UUID, Counters: events.ExtractionCounters{
				Tokens: cur, TokensAtLastExtract: baseline, ToolCallsSince: calls, NaturalBreak: !toolsInTurn}})
			lastUUID = last.UUID
			baseline = cur // recordExtractionTokenCount
		}
	}
	for k, i := range mainIdx {
		r := recs[i]
		switch r.Kind {
		case RecCompacting:
			compacting = true
		case RecCompacted:
			compacting = false
			msgs = append(msgs, msg{rec: TriggerRecord{Assistant: true, HasUsage: true, UsageTotal: r.PostTokens,
				MessageID: fmt.Sprintf("compaction-%d", r.Seq), UUID: fmt.Sprintf("compaction-%d", r.Seq)}, synthetic: true})
			if !th.ReferenceCompat {
				baseline = r.PostTokens
			}
		case RecMessage:
			msgs = append(msgs, msg{rec: r})
			if !r.Assistant {
				continue
			}
			if r.MessageID != "" && evaluated[r.MessageID] {
				continue // one response, one evaluation
			}
			if respStart < 0 {
				respStart = len(msgs) - 1
			}
			// The last record is complete only if it says so: nothing
			// follows to tell (the quiet period is a clock, and the
			// generator's sessions send stop_reason).
			complete := r.StopReason || r.MessageID == ""
			if !complete && k < len(mainIdx)-1 {
				n := recs[mainIdx[k+1]]
				complete = !(n.Kind == RecMessage && n.Assistant && n.MessageID == r.MessageID)
			}
			if complete {
				evaluated[r.MessageID] = r.MessageID != ""
				hook()
			}
		}
	}
	return out
}

// randomTranscript generates n records: user turns, streamed assistant
// responses (1-3 records sharing a message_id, usage on some, stop_reason on
// some, occasional quiet gaps), tool loops, subagent records, records
// without message_id, and compactions.
func randomTranscript(rng *rand.Rand, n int) []TriggerRecord {
	s := new(script)
	s.user(100).asst("msg_0", 50, 0, 0) // the platform sends stop_reason
	resp := 0
	for len(s.recs) < n {
		switch p := rng.IntN(100); {
		case p < 30:
			s.user(int64(rng.IntN(1500)))
		case p < 35:
			s.sub(int64(rng.IntN(5000)), rng.IntN(3))
		case p < 37:
			s.compacting()
			if rng.IntN(4) > 0 {
				s.user(int64(rng.IntN(500)))
			}
			s.compacted(int64(1000 + rng.IntN(4000)))
		case p < 40:
			s.add(TriggerRecord{Kind: RecMessage, Main: true, Assistant: true, Estimate: int64(rng.IntN(800)), ToolUses: rng.IntN(2)})
		default:
			resp++
			id := fmt.Sprintf("msg_%d", resp)
			parts := 1 + rng.IntN(3)
			usage := int64(0)
			if rng.IntN(3) > 0 {
				usage = int64(500 + rng.IntN(3000*resp))
			}
			for k := 0; k < parts; k++ {
				r := TriggerRecord{Kind: RecMessage, Main: true, Assistant: true, MessageID: id, Estimate: int64(rng.IntN(1200))}
				if k == parts-1 {
					r.ToolUses = rng.IntN(3)
					r.StopReason = rng.IntN(2) == 0
				}
				if usage > 0 && (k == parts-1 || rng.IntN(2) == 0) {
					r.HasUsage, r.UsageTotal = true, usage+int64(k*10)
				}
				if k > 0 && rng.IntN(10) == 0 {
					r.Time = s.t + int64(3*time.Second) // a quiet gap inside the response
				}
				if k > 0 && rng.IntN(8) == 0 {
					s.user(int64(rng.IntN(300))) // interleaved tool_result
				}
				s.add(r)
			}
		}
	}
	return s.recs
}
