package mcpserver

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// SessionSummary is one session of the index, as the tools show it.
type SessionSummary struct {
	Session       string   `json:"session" jsonschema:"the session id"`
	Name          string   `json:"name,omitempty" jsonschema:"a short readable name, usable as a reference"`
	Description   string   `json:"description,omitempty"`
	Summary       string   `json:"summary,omitempty"`
	Tags          []string `json:"tags,omitempty"`
	ParentSession string   `json:"parent_session,omitempty"`
	UserID        string   `json:"user_id,omitempty"`
	AgentID       string   `json:"agent_id,omitempty"`
	CreatedAt     string   `json:"created_at,omitempty"`
	UpdatedAt     string   `json:"updated_at,omitempty"`
	Ended         bool     `json:"ended,omitempty"`
	Indexed       bool     `json:"indexed" jsonschema:"whether name, description, summary and tags were written by an indexing yet"`
}

func summarize(s events.SessionIndex) SessionSummary {
	return SessionSummary{Session: s.Session, Name: s.Name, Description: s.Description, Summary: s.Summary, Tags: s.Tags,
		ParentSession: s.ParentSession, UserID: s.UserID, AgentID: s.AgentID, CreatedAt: rfc3339(s.CreatedAt),
		UpdatedAt: rfc3339(s.UpdatedAt), Ended: s.Ended, Indexed: s.Indexed()}
}

// ListInput is list_sessions' input.
type ListInput struct {
	Q      string `json:"q,omitempty" jsonschema:"keep sessions whose name, description, summary, tags or id contain every word"`
	Tag    string `json:"tag,omitempty" jsonschema:"keep sessions with this tag"`
	Limit  int    `json:"limit,omitempty" jsonschema:"sessions per page (default 50, at most 500)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"the next value of a previous page"`
}

// ListOutput is list_sessions' output.
type ListOutput struct {
	Sessions []SessionSummary `json:"sessions"`
	Next     string           `json:"next,omitempty" jsonschema:"cursor of the next page; empty on the last"`
}

// AskInput is ask_session's input.
type AskInput struct {
	Session      string `json:"session" jsonschema:"the past session to ask: its id or its name"`
	Question     string `json:"question" jsonschema:"the question, answered from that session's transcript"`
	BudgetTokens int64  `json:"budget_tokens,omitempty" jsonschema:"most tokens of session text sent to the model; 0 uses Recall's default"`
}

// AskOutput is ask_session's output.
type AskOutput struct {
	Session     string               `json:"session"`
	Answer      string               `json:"answer"`
	Sources     []events.QuerySource `json:"sources" jsonschema:"the transcript records the answer drew on"`
	Model       string               `json:"model,omitempty"`
	InputTokens int64                `json:"input_tokens" jsonschema:"estimated tokens of session text sent"`
	Records     int                  `json:"records" jsonschema:"records the text came from"`
	Truncated   int                  `json:"truncated" jsonschema:"records left out for the budget"`
}

func askOutput(r *events.QueryReply) AskOutput {
	out := AskOutput{Session: r.Session, Answer: r.Answer, Sources: r.Sources, Model: r.Model,
		InputTokens: r.InputTokens, Records: r.Records, Truncated: r.Truncated}
	if out.Sources == nil {
		out.Sources = []events.QuerySource{}
	}
	return out
}

// ResolveInput is resolve_references' input.
type ResolveInput struct {
	Text   string `json:"text,omitempty" jsonschema:"text with @@references, e.g. '@@fix-login-bug: which test failed?' or '@@auth-refactor~1'"`
	Ref    string `json:"ref,omitempty" jsonschema:"one reference without @@ instead of text: a session id or name, with ~N for N ancestors"`
	Answer bool   `json:"answer,omitempty" jsonschema:"answer the questions of '@@ref: question' forms by asking those sessions"`
}

// Resolved is one resolved reference.
type Resolved struct {
	Ref       string           `json:"ref" jsonschema:"the reference as written, without @@"`
	By        string           `json:"by" jsonschema:"how it matched: id, name or fuzzy"`
	Session   SessionSummary   `json:"session"`
	Ancestors []SessionSummary `json:"ancestors,omitempty" jsonschema:"the parents asked for with ~N, nearest first"`
	Question  string           `json:"question,omitempty"`
	Answer    *AskOutput       `json:"answer,omitempty"`
}

// ResolveOutput is resolve_references' output.
type ResolveOutput struct {
	Resolved []Resolved `json:"resolved"`
	Context  string     `json:"context,omitempty" jsonschema:"the referenced sessions' summaries (and answers) as one text, to put in the conversation before the message that referenced them"`
}

// UserMemoryInput is get_user_memory's input.
type UserMemoryInput struct {
	User  string   `json:"user" jsonschema:"the user id (the user_id of the user's sessions)"`
	Types []string `json:"types,omitempty" jsonschema:"memory types to read (e.g. profile, preferences, patterns, experiences); all when empty"`
}

// UserMemoryDoc is one long-term memory document.
type UserMemoryDoc struct {
	Target    string `json:"target" jsonschema:"whose memory: self, or a peer"`
	Type      string `json:"type"`
	Content   string `json:"content"`
	Revision  uint64 `json:"revision"`
	UpdatedAt string `json:"updated_at,omitempty"`
}

// UserMemoryOutput is get_user_memory's output.
type UserMemoryOutput struct {
	User      string          `json:"user"`
	Documents []UserMemoryDoc `json:"documents"`
	Context   string          `json:"context" jsonschema:"the documents as one block ready for the start of a new session's context"`
}

func listTool(c *client.HTTP) (*mcp.Tool, mcp.ToolHandlerFor[ListInput, ListOutput]) {
	t := &mcp.Tool{Name: "list_sessions", Description: "List past sessions of this tenant from Recall's session index " +
		"(id, name, description, summary, tags, owner), newest first, optionally filtered by words or a tag."}
	return t, func(ctx context.Context, req *mcp.CallToolRequest, in ListInput) (*mcp.CallToolResult, ListOutput, error) {
		rep, err := c.Sessions(callContext(ctx, req), events.SessionsRequest{Q: in.Q, Tag: in.Tag, Limit: in.Limit, Cursor: in.Cursor})
		if err != nil {
			return nil, ListOutput{}, err
		}
		out := ListOutput{Sessions: []SessionSummary{}, Next: rep.Next}
		for _, s := range rep.Sessions {
			out.Sessions = append(out.Sessions, summarize(s))
		}
		return nil, out, nil
	}
}

func askTool(c *client.HTTP) (*mcp.Tool, mcp.ToolHandlerFor[AskInput, AskOutput]) {
	t := &mcp.Tool{Name: "ask_session", Description: "Ask a past session a question: Recall answers from that " +
		"session's transcript and names the records it drew on. The session may be given by id or by name."}
	return t, func(ctx context.Context, req *mcp.CallToolRequest, in AskInput) (*mcp.CallToolResult, AskOutput, error) {
		rep, err := c.Query(callContext(ctx, req), in.Session, events.QueryRequest{Question: in.Question, BudgetTokens: in.BudgetTokens})
		if err != nil {
			return nil, AskOutput{}, err
		}
		return nil, askOutput(rep), nil
	}
}

func resolveTool(c *client.HTTP) (*mcp.Tool, mcp.ToolHandlerFor[ResolveInput, ResolveOutput]) {
	t := &mcp.Tool{Name: "resolve_references", Description: "Resolve @@session references: give text containing " +
		"@@name, @@id, @@name~N (N ancestors) or '@@name: question', or one ref. Returns the sessions each reference " +
		"means and a context text with their summaries (and, with answer, the answers to the questions). A name " +
		"that matches several sessions fails with the candidates; ask again with an id."}
	return t, func(ctx context.Context, req *mcp.CallToolRequest, in ResolveInput) (*mcp.CallToolResult, ResolveOutput, error) {
		rep, err := resolve(callContext(ctx, req), c, in)
		if err != nil {
			return nil, ResolveOutput{}, err
		}
		out := ResolveOutput{Resolved: []Resolved{}}
		for _, r := range rep.Resolved {
			v := Resolved{Ref: r.Ref, By: r.By, Session: summarize(r.Session), Question: r.Question}
			for _, a := range r.Ancestors {
				v.Ancestors = append(v.Ancestors, summarize(a))
			}
			if r.Answer != nil {
				a := askOutput(r.Answer)
				v.Answer = &a
			}
			out.Resolved = append(out.Resolved, v)
		}
		if rep.Context != nil {
			var parts []string
			for _, b := range rep.Context.Content {
				if b.Type == events.BlockText {
					parts = append(parts, b.Text)
				}
			}
			out.Context = strings.Join(parts, "\n")
		}
		return nil, out, nil
	}
}

func userMemoryTool(c *client.HTTP) (*mcp.Tool, mcp.ToolHandlerFor[UserMemoryInput, UserMemoryOutput]) {
	t := &mcp.Tool{Name: "get_user_memory", Description: "Read a user's long-term memory: what Recall learned about " +
		"the user across their sessions (profile, preferences, patterns, experiences), as documents and as one " +
		"context block to start a new session with."}
	return t, func(ctx context.Context, req *mcp.CallToolRequest, in UserMemoryInput) (*mcp.CallToolResult, UserMemoryOutput, error) {
		rep, err := c.UserMemory(callContext(ctx, req), in.User, in.Types...)
		if err != nil {
			return nil, UserMemoryOutput{}, err
		}
		out := UserMemoryOutput{User: rep.User, Documents: []UserMemoryDoc{}, Context: rep.Context}
		if out.User == "" {
			out.User = in.User
		}
		for _, d := range rep.Documents {
			out.Documents = append(out.Documents, UserMemoryDoc{Target: d.Target, Type: d.Type, Content: d.Content,
				Revision: d.Revision, UpdatedAt: rfc3339(d.UpdatedAt)})
		}
		return nil, out, nil
	}
}

// resolve resolves in.Ref alone, or every @@reference of in.Text.
func resolve(ctx context.Context, c *client.HTTP, in ResolveInput) (*events.ResolveReply, error) {
	if in.Text != "" || in.Ref == "" {
		return c.References(ctx, in.Text, in.Answer)
	}
	r, err := c.Resolve(ctx, in.Ref)
	if err != nil {
		return nil, err
	}
	return &events.ResolveReply{Resolved: []events.Resolution{*r}}, nil
}
