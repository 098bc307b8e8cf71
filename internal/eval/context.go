package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/eval/sessiongen"
	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// Context is what an agent would continue with after a compaction: a
// summary (possibly empty) and the messages kept verbatim.
type Context struct {
	// Outcome names how the context was made (a compactor outcome, or
	// "truncated"); Served is false when the method gave no context (the
	// platform would have to compact by other means) and the context is
	// then empty.
	Outcome string
	Served  bool
	Reason  string
	Summary string
	Kept    []events.Message
	// Tokens is the context's size (characters / 4, memory.EstimateMessage).
	Tokens int64
}

// Text renders the context as the model would read it: the summary, then
// each kept message's blocks (text, thinking, tool calls with their input,
// tool results) in order.
func (c *Context) Text() string {
	var b strings.Builder
	b.WriteString(c.Summary)
	for i := range c.Kept {
		m := &c.Kept[i]
		b.WriteString("\n\n[" + m.Role + "]\n")
		writeContent(&b, m.Content)
	}
	return b.String()
}

func writeContent(b *strings.Builder, c events.Content) {
	for i := range c {
		bl := &c[i]
		switch bl.Type {
		case events.BlockText:
			b.WriteString(bl.Text + "\n")
		case events.BlockThinking:
			b.WriteString(bl.Thinking + "\n")
		case events.BlockToolUse:
			b.WriteString("tool call " + bl.Name + " " + string(bl.Input) + "\n")
		case events.BlockToolResult:
			if bl.IsError {
				b.WriteString("tool error: ")
			}
			writeContent(b, bl.Content)
		}
	}
}

// messagesTokens sums memory.EstimateMessage over msgs.
func messagesTokens(msgs []events.Message) int64 {
	var n int64
	for i := range msgs {
		n += memory.EstimateMessage(&msgs[i])
	}
	return n
}

// FromReply turns a compactor reply into the context the platform would
// continue with: the summary message and the kept messages. A reply that was
// not served gives an empty context.
func FromReply(r *events.CompactReply) (*Context, error) {
	c := &Context{Outcome: r.Outcome, Served: r.Served, Reason: r.Reason}
	if !r.Served {
		return c, nil
	}
	if r.Summary != nil {
		var b strings.Builder
		writeContent(&b, r.Summary.Content)
		c.Summary = b.String()
	}
	for i := range r.Kept {
		var m events.Message
		if err := json.Unmarshal(r.Kept[i].Data(), &m); err != nil {
			return nil, fmt.Errorf("decoding kept record %d: %w", i, err)
		}
		c.Kept = append(c.Kept, m)
	}
	c.Tokens = r.TokensAfter
	if c.Tokens == 0 {
		c.Tokens = memory.EstimateText(c.Summary) + messagesTokens(c.Kept)
	}
	return c, nil
}

// Prepared is a generated session imported as Recall events.
type Prepared struct {
	*sessiongen.Session
	Events []event.Event
	// Transcript holds the session's transcript records in order: messages
	// (main thread) and compactions.
	Transcript []Record
	// Artifacts are the files the transcript's tool calls changed (the
	// truth of the artifact probe) and Cwd the session's working
	// directory.
	Artifacts []events.TrailFile
	Cwd       string
}

// Record is one transcript record of a prepared session.
type Record struct {
	Message   *events.Message
	Compacted *events.SessionCompacted
}

// Prepare imports a generated session for tenant.
func Prepare(s *sessiongen.Session, tenant string) (*Prepared, error) {
	res, err := importer.ClaudeCode(bytes.NewReader(s.JSONL), importer.Options{Tenant: tenant, Session: s.ID})
	if err != nil {
		return nil, fmt.Errorf("importing %s: %w", s.ID, err)
	}
	p := &Prepared{Session: s, Events: res.Events}
	for _, e := range res.Events {
		switch e.Type() {
		case events.TypeMessage:
			var m events.Message
			if err := json.Unmarshal(e.Data(), &m); err != nil {
				return nil, fmt.Errorf("decoding %s: %w", e.ID(), err)
			}
			if m.IsMain() {
				p.Transcript = append(p.Transcript, Record{Message: &m})
			}
		case events.TypeSessionCompacted:
			var c events.SessionCompacted
			if err := json.Unmarshal(e.Data(), &c); err != nil {
				return nil, fmt.Errorf("decoding %s: %w", e.ID(), err)
			}
			p.Transcript = append(p.Transcript, Record{Compacted: &c})
		}
	}
	p.Artifacts, p.Cwd = transcriptArtifacts(s, p.Transcript)
	return p, nil
}

// current returns the messages after the last compaction: the platform's
// context before this compaction (the earlier summary aside).
func (p *Prepared) current() []events.Message {
	var out []events.Message
	for _, r := range p.Transcript {
		if r.Compacted != nil {
			out = out[:0]
			continue
		}
		out = append(out, *r.Message)
	}
	return out
}
