package console

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// Bounds of a transcript page: at most maxTranscript records (default
// defaultTranscript), each block's text cut to maxBlockText characters.
const (
	maxTranscript     = 200
	defaultTranscript = 50
	maxBlockText      = 4000
)

// entry is one record of the transcript viewer.
type entry struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"` // message, compacted, or the record's type
	Role   string    `json:"role,omitempty"`
	Model  string    `json:"model,omitempty"`
	Tokens int64     `json:"tokens,omitempty"`
	Blocks []block   `json:"blocks,omitempty"`
	Note   string    `json:"note,omitempty"`
}

// block is a content block with its text cut (Cut: how much was left out).
type block struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	Name      string `json:"name,omitempty"`
	ID        string `json:"id,omitempty"`
	ToolUseID string `json:"tool_use_id,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`
	Cut       int    `json:"cut,omitempty"`
}

// transcriptPage answers a page of the session's records after stream
// sequence ?after= (0: from the first), ?limit= records; next_after, when
// set, asks for the next page.
func (c *Console) transcriptPage(w http.ResponseWriter, r *http.Request) {
	tenant, session, ok := c.sessionOf(w, r)
	if !ok {
		return
	}
	after, err1 := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	limit, err2 := strconv.Atoi(r.URL.Query().Get("limit"))
	if (err1 != nil && r.URL.Query().Get("after") != "") || (err2 != nil && r.URL.Query().Get("limit") != "") || limit < 0 {
		fail(w, http.StatusBadRequest, "after and limit must be non-negative integers")
		return
	}
	if limit == 0 {
		limit = defaultTranscript
	}
	limit = min(limit, maxTranscript)
	release, ok := c.admit(w, r, tenant, "GET /console/api/tenants/{tenant}/sessions/{session}/transcript")
	if !ok {
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	out := struct {
		Records   []entry `json:"records"`
		NextAfter uint64  `json:"next_after,omitempty"`
	}{Records: []entry{}}
	err := transcript.ScanRaw(ctx, c.nc, c.layout.Stream(tenant, session), c.layout.Subject(tenant, session), after+1, 0, min(limit+1, readBatch),
		func(m transcript.Raw) bool {
			if len(out.Records) == limit {
				out.NextAfter = out.Records[limit-1].Seq
				return false
			}
			out.Records = append(out.Records, toEntry(m))
			return true
		})
	if err != nil {
		unavailable(w, err)
		return
	}
	writeJSON(w, out)
}

func toEntry(m transcript.Raw) entry {
	e := entry{Seq: m.Seq, Time: m.Time, Kind: m.Header.Get("ce-type")}
	rec, err := transcript.Decode(m.Header, m.Data)
	switch {
	case err != nil:
		e.Note = "undecodable: " + err.Error()
	case rec.Message != nil:
		e.Kind, e.Role, e.Model, e.Tokens = "message", rec.Message.Role, rec.Message.Model, memory.EstimateMessage(rec.Message)
		for _, b := range rec.Message.Content {
			e.Blocks = append(e.Blocks, toBlock(b))
		}
	case rec.Compacted != nil:
		e.Kind, e.Note = "compacted", "compacted "+itoa(rec.Compacted.PreTokens)+" → "+itoa(rec.Compacted.PostTokens)+" tokens"
	default:
		e.Kind = rec.Event.Type()
	}
	return e
}

func toBlock(b events.Block) block {
	out := block{Type: b.Type, Name: b.Name, ID: b.ID, ToolUseID: b.ToolUseID, IsError: b.IsError}
	switch {
	case b.Text != "":
		out.Text = b.Text
	case b.Thinking != "":
		out.Text = b.Thinking
	case len(b.Input) > 0:
		out.Text = string(b.Input)
	}
	for _, c := range b.Content {
		out.Text += c.Text
	}
	if r := []rune(out.Text); len(r) > maxBlockText {
		out.Text, out.Cut = string(r[:maxBlockText]), len(r)-maxBlockText
	}
	return out
}
