package gatewaysvc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/gateway/wire"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// recallEnv is a real NATS server with Recall's streams.
type recallEnv struct {
	srv *natstest.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

func startRecall(t *testing.T) *recallEnv {
	t.Helper()
	s := natstest.Start(t)
	nc, js := s.Connect(t, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	return &recallEnv{srv: s, nc: nc, js: js}
}

// attached is a gateway in front of upstream, attached to env.
func (env *recallEnv) attached(t *testing.T, upstream string) (*Gateway, string, *syncBuffer) {
	t.Helper()
	g, url, logs := newGateway(t, upstream, nil)
	g.Attach(t.Context(), env.nc, env.js)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.detach(ctx)
	})
	return g, url, logs
}

// records reads the session's stored transcript messages.
func (env *recallEnv) records(t *testing.T, session string) []events.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	layout, err := provision.DiscoverLayout(ctx, env.js)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := transcript.NewReader(env.nc, layout).Read(ctx, ingestsvc.DefaultTenant, session, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []events.Message
	for _, r := range recs {
		if r.Message != nil {
			out = append(out, *r.Message)
		}
	}
	return out
}

// settled waits until the gateway's capture has handled every job it
// queued (the exchanges a test sent are queued when their response ends).
func settled(t *testing.T, g *Gateway) {
	t.Helper()
	testpoll.Until(t, 30*time.Second, "capture handled what it queued", func() bool {
		return g.capture.handled.Load() == g.capture.queued.Load()
	})
}

// countTools counts each tool_use id and each tool_result's tool_use_id
// in records of the main thread (sidechain: of the subagents).
func countTools(recs []events.Message, main bool) (uses, results map[string]int) {
	uses, results = map[string]int{}, map[string]int{}
	for _, m := range recs {
		if m.IsMain() != main {
			continue
		}
		for _, b := range m.Content {
			switch b.Type {
			case events.BlockToolUse:
				uses[b.ID]++
			case events.BlockToolResult:
				results[b.ToolUseID]++
			}
		}
	}
	return uses, results
}

// writeSSE writes resp as the Messages API's event stream.
func writeSSE(w http.ResponseWriter, resp wire.Response) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	ev := func(name string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		w.(http.Flusher).Flush()
	}
	start := resp
	start.Type, start.Role, start.Content, start.StopReason = "message", "assistant", events.Content{}, ""
	ev("message_start", map[string]any{"type": "message_start", "message": start})
	for i, b := range resp.Content {
		switch b.Type {
		case events.BlockToolUse:
			ev("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}})
			ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]string{"type": "input_json_delta", "partial_json": string(b.Input)}})
		default:
			ev("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]string{"type": "text", "text": ""}})
			ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]string{"type": "text_delta", "text": b.Text}})
		}
		ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	ev("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": resp.StopReason},
		"usage": map[string]int64{"output_tokens": resp.Usage.OutputTokens}})
	ev("message_stop", map[string]string{"type": "message_stop"})
}

// readReply reads a response of the gateway into its reply.
func readReply(t *testing.T, resp *http.Response, api string) *wire.Reply {
	t.Helper()
	defer resp.Body.Close()
	a := wire.NewAssembler(api, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"), 64<<20)
	if _, err := io.Copy(a, resp.Body); err != nil {
		t.Fatal(err)
	}
	r, err := a.Reply()
	if err != nil {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	return r
}

// upstreamFunc serves an upstream from a function.
func upstreamFunc(t *testing.T, f http.HandlerFunc) string {
	t.Helper()
	up := httptest.NewServer(f)
	t.Cleanup(up.Close)
	return up.URL
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
