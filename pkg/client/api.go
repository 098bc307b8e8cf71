package client

import (
	"context"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/pkg/events"
)

// API is what the NATS client (*Client) and the HTTP client (*HTTP) both
// do, with the same requests and answers: a caller written against it runs
// over either transport. Refusals differ by transport (*ServiceError over
// NATS, *APIError over HTTP); Status and Retryable read both.
type API interface {
	Publish(ctx context.Context, e event.Event) (Result, error)
	PublishBatch(ctx context.Context, evs []event.Event) ([]Result, error)
	Memory(ctx context.Context, session string) (*events.MemoryReply, error)
	Extract(ctx context.Context, session string, r events.ExtractRequest) (*events.ExtractResult, error)
	Compact(ctx context.Context, session string, r events.CompactRequest) (*events.CompactReply, error)
	Edit(ctx context.Context, session string, r events.EditRequest) (*events.EditReply, error)
	Index(ctx context.Context, session string) (*events.IndexReply, error)
	Reindex(ctx context.Context, session string) (*events.IndexReply, error)
	Sessions(ctx context.Context, r events.SessionsRequest) (*events.SessionsReply, error)
	Resolve(ctx context.Context, ref string) (*events.Resolution, error)
	References(ctx context.Context, text string, answer bool) (*events.ResolveReply, error)
	Query(ctx context.Context, ref string, r events.QueryRequest) (*events.QueryReply, error)
	Commit(ctx context.Context, session string) (*events.MemoryCommitted, error)
	UserMemory(ctx context.Context, user string, types ...string) (*events.LTMReply, error)
}

var (
	_ API = (*Client)(nil)
	_ API = (*HTTP)(nil)
)
