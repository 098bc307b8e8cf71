package client

import (
	"context"

	"github.com/recallhq/recall/pkg/events"
)

// Long-term memory (docs/long-term-memory.md).

// Commit commits session's batch since its last commit now (waiting for a
// running commit of the same user) and returns what was written and
// skipped. A session without a user_id, or with nothing new, is a
// *ServiceError with Code "422"; a policy naming an unknown memory type is
// "400".
func (c *Client) Commit(ctx context.Context, session string) (*events.MemoryCommitted, error) {
	var reply events.MemoryCommitted
	if err := c.request(ctx, events.VerbCommit, session, events.CommitRequest{}, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// UserMemory returns user's long-term memory (the types given, or all) and
// a context block ready for a new session's start.
func (c *Client) UserMemory(ctx context.Context, user string, types ...string) (*events.LTMReply, error) {
	var reply events.LTMReply
	if err := c.request(ctx, events.VerbLTM, user, events.LTMRequest{Types: types}, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}
