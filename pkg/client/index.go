package client

import (
	"context"

	"github.com/recallhq/recall/pkg/events"
)

// The session index (docs/sessions.md): names, summaries and tags of
// sessions, references to past sessions, and questions to them.

// Index returns session's index entry: before its first indexing only its
// facts (Indexed() is false); a session Recall knows nothing of is a
// *ServiceError with Code "404".
func (c *Client) Index(ctx context.Context, session string) (*events.IndexReply, error) {
	var reply events.IndexReply
	if err := c.request(ctx, events.VerbIndex, session, nil, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// Reindex indexes session now (after a running indexing of it) and returns
// the entry with the outcome; a failed indexing is an outcome with Success
// false, not an error. An ephemeral session is Code "409"; indexing
// switched off is "503".
func (c *Client) Reindex(ctx context.Context, session string) (*events.IndexReply, error) {
	var reply events.IndexReply
	if err := c.request(ctx, events.VerbReindex, session, nil, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// Sessions lists the tenant's sessions, newest first, one page at a time
// (pass the reply's Next as the next request's Cursor).
func (c *Client) Sessions(ctx context.Context, r events.SessionsRequest) (*events.SessionsReply, error) {
	var reply events.SessionsReply
	if err := c.request(ctx, events.VerbSessions, events.TenantScope, r, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// Resolve resolves a reference (a session id or name, "~N" for N
// ancestors). An ambiguous one is Code "409" whose Problem lists the
// candidates; an unknown one is "404".
func (c *Client) Resolve(ctx context.Context, ref string) (*events.Resolution, error) {
	var reply events.ResolveReply
	if err := c.request(ctx, events.VerbResolve, events.TenantScope, events.ResolveRequest{Ref: ref}, &reply); err != nil {
		return nil, err
	}
	return &reply.Resolved[0], nil
}

// References resolves every @@reference of a user message and returns the
// context message to store before it (nil Context when there is none);
// with answer, "@@ref: question" forms are answered too.
func (c *Client) References(ctx context.Context, text string, answer bool) (*events.ResolveReply, error) {
	var reply events.ResolveReply
	if err := c.request(ctx, events.VerbResolve, events.TenantScope, events.ResolveRequest{Text: text, Answer: answer}, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// Query asks the session ref names (an id or a name) a question.
func (c *Client) Query(ctx context.Context, ref string, r events.QueryRequest) (*events.QueryReply, error) {
	var reply events.QueryReply
	if err := c.request(ctx, events.VerbQuery, ref, r, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}
