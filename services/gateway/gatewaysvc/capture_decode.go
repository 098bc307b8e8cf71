package gatewaysvc

import (
	"encoding/json"
	"strings"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/gateway/wire"
)

// captured is what one job becomes: the session, the thread within it and
// the records the exchange holds (stored or not yet).
type captured struct {
	session Session
	// agent is "" for the main thread; else the sidechain's agent id: the
	// subagent's (x-claude-code-agent-id) or "side-" and a hash of the
	// system prompt for a side question.
	agent   string
	records []events.Message
}

// sideQuestion says whether an Anthropic request is a side question of
// its session rather than its main thread: a request of Claude Code
// (which sends tools with every main-thread request) without tools, or a
// request without tools in a session whose main thread has them — title
// generation, quota probes, one-off questions with their own system
// prompt.
func sideQuestion(r *wire.MessagesRequest, claudeCode, mainHasTools bool) bool {
	if hasTools(r.Raw["tools"]) {
		return false
	}
	return claudeCode || mainHasTools
}

func hasTools(raw json.RawMessage) bool {
	var tools []json.RawMessage
	return json.Unmarshal(raw, &tools) == nil && len(tools) > 0
}

// decodeAnthropic turns an Anthropic job into its records. A client
// compaction turn (the client asking the model for a summary of the
// conversation) keeps the conversation's messages but neither its
// summarization request nor the reply (the summary); a compacted history
// (the client's continuation after compacting) does not store its first
// user message, which holds the summary.
func (c *capturer) decodeAnthropic(job *captureJob, st func(Session) *sessionState) (*captured, error) {
	r, err := wire.DecodeMessagesForRecords(job.body)
	if err != nil {
		return nil, err
	}
	out := &captured{session: AnthropicSession(job.header, r)}
	state := st(out.session)
	tools := hasTools(r.Raw["tools"])
	if a := strings.TrimSpace(job.header.Get("X-Claude-Code-Agent-Id")); a != "" {
		out.agent = sessionID(a)
	} else if sideQuestion(r, job.header.Get("X-Claude-Code-Session-Id") != "", state.hasTools.Load()) {
		out.agent = "side-" + hashID(string(r.System))[3:15]
	} else if tools {
		state.hasTools.Store(true)
	}
	reply := job.reply
	hooks := c.g.clientCompaction
	if at, ok := hooks.Turn(job.tenant, r.Messages); ok {
		stripTurn(r.Messages, at)
		reply = nil
	}
	skip := ""
	if i := firstUser(r.Messages); i >= 0 && hooks.Continuation(job.tenant, r.Messages) {
		skip = wire.RecordIDs(threadScope(out.session.ID, out.agent), r.Messages)[i]
	}
	h := wire.History{Session: threadScope(out.session.ID, out.agent), Messages: r.Messages}
	for _, m := range h.Records(reply) {
		if m.UUID != skip {
			out.records = append(out.records, m)
		}
	}
	return out, nil
}

// threadScope is the scope of a thread's record ids: the session for the
// main thread, session/agent for a sidechain, so a side question that
// repeats the main thread's first message is another record.
func threadScope(session, agent string) string {
	if agent == "" {
		return session
	}
	return session + "/" + agent
}

// stripTurn removes the summarization request from the last user message:
// its blocks from at on.
func stripTurn(msgs []wire.Msg, at int) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == events.RoleUser {
			msgs[i].Content = msgs[i].Content[:at:at]
			msgs[i].Raw = nil
			return
		}
	}
}

func firstUser(msgs []wire.Msg) int {
	for i := range msgs {
		if msgs[i].Role == events.RoleUser {
			return i
		}
	}
	return -1
}

// decodeOpenAI turns a Chat or Responses job into its records.
func (c *capturer) decodeOpenAI(job *captureJob) (*captured, error) {
	if job.api == wire.ReplyChat {
		r, err := wire.DecodeChatForRecords(job.body)
		if err != nil {
			return nil, err
		}
		out := &captured{session: ChatSession(job.header, r)}
		out.records = (&wire.History{Session: out.session.ID, Chat: r.Messages}).Records(job.reply)
		return out, nil
	}
	r, err := wire.DecodeResponsesForRecords(job.body)
	if err != nil {
		return nil, err
	}
	out := &captured{session: ResponsesSession(job.header, r, &c.chains)}
	h := wire.History{Session: out.session.ID, Items: r.Items, Previous: r.PreviousResponseID, Responses: true}
	out.records = h.Records(job.reply)
	if job.reply != nil {
		c.chains.put(job.reply.ID, out.session.ID)
	}
	return out, nil
}
