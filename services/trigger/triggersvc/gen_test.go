package triggersvc

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// item is one transcript event to publish.
type item struct {
	tenant, session, typ string
	data                 any
}

// publish stores items in their shards of the server's transcript as
// ingest does.
func publish(t *testing.T, js jetstream.JetStream, items []item) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	layout := serverLayout(t, js)
	var futs []jetstream.PubAckFuture
	for i, it := range items {
		data, _ := json.Marshal(it.data)
		e := event.New()
		e.SetID(fmt.Sprintf("%s-%d-%d", it.session, i, rand.Int64()))
		e.SetSource("/test")
		e.SetType(it.typ)
		e.SetSubject(it.session)
		e.SetExtension(events.ExtTenant, it.tenant)
		_ = e.SetData(event.ApplicationJSON, data)
		m := natsce.NewMsg(layout.Subject(it.tenant, it.session), &e)
		m.Header.Set(jetstream.MsgIDHeader, events.DedupID(it.tenant, e.ID()))
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("publish timed out")
		}
	}
}

func text(rng *rand.Rand, tokens int) string {
	return strings.Repeat("word ", tokens*4/5+rng.IntN(4))
}

// generate builds a long interleaved transcript over several sessions:
// user turns, streamed responses (thinking, text, tool_use records sharing
// a message_id), tool results, usage on some responses, subagent records,
// string content, and a compaction. Every session ends with a complete
// response.
func generate(seed uint64, perSession int) []item {
	rng := rand.New(rand.NewPCG(seed, 1))
	sessions := []struct{ tenant, session string }{{"acme", "s1"}, {"acme", "s2"}, {"acme", "s3"}, {"beta", "s1"}}
	var streams [][]item
	for si, ss := range sessions {
		streams = append(streams, genSession(rng, si, ss.tenant, ss.session, perSession))
	}
	return interleave(rng, streams)
}

// genSession builds one session's transcript of at least perSession
// records (generate's session number si), ending with a complete response.
func genSession(rng *rand.Rand, si int, tenant, session string, perSession int) []item {
	var out []item
	msg := func(m events.Message) {
		m.UUID = fmt.Sprintf("%s-%s-%d", tenant, session, len(out))
		out = append(out, item{tenant, session, events.TypeMessage, m})
	}
	resp, ctxTokens := 0, int64(0)
	for len(out) < perSession {
		switch p := rng.IntN(100); {
		case p < 25:
			msg(events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: text(rng, 50+rng.IntN(400))}}})
		case p < 30:
			raw, _ := json.Marshal(map[string]any{"uuid": "x", "role": "user", "content": text(rng, 100)})
			var m events.Message
			_ = json.Unmarshal(raw, &m) // string content
			msg(m)
		case p < 35:
			msg(events.Message{Role: events.RoleAssistant, QuerySource: events.QuerySubagent, MessageID: "sub",
				Content: events.Content{{Type: events.BlockText, Text: text(rng, 2000)}, {Type: events.BlockToolUse, Name: "Read", Input: json.RawMessage(`{}`)}}})
		case p < 37 && si%2 == 0:
			out = append(out, item{tenant, session, events.TypeSessionCompacting, events.SessionCompacting{Trigger: "auto"}})
			out = append(out, item{tenant, session, events.TypeSessionCompacted, events.SessionCompacted{PreTokens: ctxTokens, PostTokens: 1500}})
			ctxTokens = 1500
		default:
			resp++
			genResponse(rng, fmt.Sprintf("msg_%d_%d", si, resp), &ctxTokens, msg)
		}
	}
	msg(events.Message{Role: events.RoleAssistant, MessageID: fmt.Sprintf("final_%d", si), StopReason: "end_turn", Content: events.Content{{Type: events.BlockText, Text: "done"}}})
	return out
}

// genResponse streams one assistant response id in one to three records
// (thinking, text, tool calls), usage on some, then the tool results.
func genResponse(rng *rand.Rand, id string, ctxTokens *int64, msg func(events.Message)) {
	parts := 1 + rng.IntN(3)
	tools := rng.IntN(3)
	var usage *events.Usage
	if rng.IntN(3) > 0 {
		*ctxTokens += int64(200 + rng.IntN(800))
		usage = &events.Usage{InputTokens: *ctxTokens, OutputTokens: 100, CacheReadInputTokens: 10}
	}
	for k := 0; k < parts; k++ {
		m := events.Message{Role: events.RoleAssistant, MessageID: id, Usage: usage}
		switch {
		case k == parts-1 && tools > 0:
			for j := 0; j < tools; j++ {
				m.Content = append(m.Content, events.Block{Type: events.BlockToolUse, ID: fmt.Sprintf("tu%d", j), Name: "Bash", Input: json.RawMessage(`{"command": "ls -la"}`)})
			}
			m.StopReason = "tool_use"
		case k == 0 && parts > 1:
			m.Content = events.Content{{Type: events.BlockThinking, Thinking: text(rng, 100)}}
		default:
			m.Content = events.Content{{Type: events.BlockText, Text: text(rng, 30+rng.IntN(300))}}
			if k == parts-1 {
				m.StopReason = "end_turn"
			}
		}
		msg(m)
	}
	if tools > 0 {
		var res events.Content
		for j := 0; j < tools; j++ {
			res = append(res, events.Block{Type: events.BlockToolResult, ToolUseID: fmt.Sprintf("tu%d", j), Content: events.Content{{Type: events.BlockText, Text: text(rng, 20+rng.IntN(200))}}})
		}
		msg(events.Message{Role: events.RoleUser, Content: res})
	}
}

// interleave merges the sessions' transcripts randomly, a few records of
// one at a time, keeping each session's order.
func interleave(rng *rand.Rand, streams [][]item) []item {
	var all []item
	for {
		var live []int
		for i := range streams {
			if len(streams[i]) > 0 {
				live = append(live, i)
			}
		}
		if len(live) == 0 {
			return all
		}
		i := live[rng.IntN(len(live))]
		n := min(1+rng.IntN(4), len(streams[i]))
		all = append(all, streams[i][:n]...)
		streams[i] = streams[i][n:]
	}
}

// manySessions interleaves generate's transcripts of sets seeds into one,
// each set under its own session names.
func manySessions(sets int, perSession int) []item {
	var all [][]item
	for k := range sets {
		its := generate(uint64(100+k), perSession)
		for i := range its {
			its[i].session = fmt.Sprintf("k%d-%s", k, its[i].session)
		}
		all = append(all, its)
	}
	var out []item
	for i := 0; ; i++ {
		added := false
		for _, its := range all {
			if i < len(its) {
				out = append(out, its[i])
				added = true
			}
		}
		if !added {
			return out
		}
	}
}
