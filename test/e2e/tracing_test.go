package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/internal/telemetry/telemetrytest"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/compactor/compactorsvc"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// pipeline runs the four services in this process.
type pipeline struct {
	httpURL string
	wg      sync.WaitGroup
	cancel  context.CancelFunc
	ingest  *ingestsvc.Service
}

// startPipeline runs the pipeline; opts adjust the ingest configuration.
func startPipeline(t *testing.T, opts ...func(*ingestsvc.Config)) (*pipeline, *natstest.Server) {
	t.Helper()
	return startPipelineWith(t, nil, opts...)
}

// startPipelineWith runs the pipeline; compactor, when not nil, adjusts the
// compactor's configuration (full compaction is off unless it turns it on).
func startPipelineWith(t *testing.T, compactor func(*compactorsvc.Config), opts ...func(*ingestsvc.Config)) (*pipeline, *natstest.Server) {
	t.Helper()
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	prov := provision.Config{Partitions: 4}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := provision.Ensure(ctx, js, prov); err != nil {
		t.Fatal(err)
	}
	nc := natsconn.Config{URL: srv.ClientURL()}
	log := telemetry.NewLogger(io.Discard, telemetry.Config{LogLevel: "error"})
	p := &pipeline{}
	runCtx, stop := context.WithCancel(context.Background())
	p.cancel = stop

	icfg := ingestsvc.Config{NATS: nc, Config: prov, HTTPAddr: "127.0.0.1:0"}
	for _, o := range opts {
		o(&icfg)
	}
	ing, err := ingestsvc.Start(runCtx, icfg, log)
	if err != nil {
		t.Fatal(err)
	}
	p.ingest = ing
	p.httpURL = "http://" + ing.Addr()
	run := func(f func(context.Context) error) {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); _ = f(runCtx) }()
	}
	run(func(ctx context.Context) error {
		return triggersvc.Run(ctx, triggersvc.Config{NATS: nc, Config: prov, MinTokensToInit: 50, MinTokensBetweenUpdate: 50,
			ToolCallsBetweenUpdates: 3, ResponseQuietPeriod: 200 * time.Millisecond, AckWait: 5 * time.Second,
			PinnedTTL: 2 * time.Second, ExtractTimeout: 20 * time.Second, MaxSessions: 1000, SessionIdle: time.Minute,
			MaxAckPending: 1000, PullBatch: 100, AckEvery: 10}, log)
	})
	run(func(ctx context.Context) error {
		return extractorsvc.Run(ctx, extractorsvc.Config{NATS: nc, Config: prov, Provider: llm.NewOffline(), WorkerID: "w1",
			AckWait: 5 * time.Second, HeartbeatTTL: 2 * time.Second, FetchWait: time.Second, StaleThreshold: 5 * time.Second,
			Concurrency: 2, DrainTimeout: 2 * time.Second, MaxTurns: 4, MaxConversationTokens: 100000, MaxAttempts: 3}, log)
	})
	ccfg := compactorsvc.Config{NATS: nc, Config: prov, WaitTimeout: 2 * time.Second,
		StaleThreshold: 5 * time.Second, KeepMinTokens: 10, KeepMinTextMessages: 1, KeepMaxTokens: 40000}
	if compactor != nil {
		compactor(&ccfg)
	}
	run(func(ctx context.Context) error { return compactorsvc.Run(ctx, ccfg, log) })
	t.Cleanup(func() {
		stop()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ing.Shutdown(sctx)
		p.wg.Wait()
	})
	// Ready when every service's micro endpoint answers discovery.
	pc, _ := srv.Connect(t)
	for _, name := range []string{triggersvc.ServiceName, extractorsvc.ServiceName, compactorsvc.ServiceName} {
		testpoll.Until(t, 20*time.Second, name+" answering discovery", func() bool {
			_, err := pc.Request("$SRV.PING."+name, nil, 200*time.Millisecond)
			return err == nil
		})
	}
	return p, srv
}

// message is a transcript message of blocks (uuid id, message id
// "msg-<id>"), complete when stop is set.
func message(session, id string, role string, stop string, blocks ...events.Block) map[string]any {
	return eventtest.Map(e2eSession(session).Message(id, events.Message{Role: role, Content: blocks, StopReason: stop, MessageID: "msg-" + id}))
}

// TestOneTraceFollowsAMessage proves that the trace a platform starts when it
// publishes a message reaches ingest, the trigger's decision, the extractor,
// its LLM call, the memory commit and the completion event; and that a
// compaction request gets its own trace through the HTTP edge and the
// compactor.
func TestOneTraceFollowsAMessage(t *testing.T) {
	rec := telemetrytest.NewRecorder(t)
	p, srv := startPipeline(t)
	nc, _ := srv.Connect(t)
	completed, err := nc.SubscribeSync(events.EventsSubject(events.KindExtractionCompleted, "default", "s1"))
	if err != nil {
		t.Fatal(err)
	}

	long := strings.Repeat("Please refactor the parser so that it streams tokens. ", 20)
	batch := []map[string]any{
		message("s1", "u1", events.RoleUser, "", events.Block{Type: events.BlockText, Text: long}),
		message("s1", "a1", events.RoleAssistant, "tool_use", events.Block{Type: events.BlockToolUse, ID: "t1", Name: "Read", Input: json.RawMessage(`{"file_path":"parser.go"}`)}),
		// A large tool result: the compaction must end smaller than the context.
		message("s1", "u2", events.RoleUser, "", events.Block{Type: events.BlockToolResult, ToolUseID: "t1", Content: events.Content{{Type: events.BlockText, Text: strings.Repeat("func parse() {}\n", 2000)}}}),
		message("s1", "a2", events.RoleAssistant, "end_turn", events.Block{Type: events.BlockText, Text: "The parser now streams tokens; tests pass."}),
	}
	body, _ := json.Marshal(batch)

	tracer := otel.Tracer("e2e/platform")
	ctx, root := tracer.Start(context.Background(), "platform.publish")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.httpURL+"/v1/events", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/cloudevents-batch+json")
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	root.End()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("ingest answered %d: %s", resp.StatusCode, b)
	}
	if _, err := completed.NextMsg(30 * time.Second); err != nil {
		t.Fatalf("no extraction completed: %v", err)
	}
	traceID := root.SpanContext().TraceID()

	// The spans that must share the publisher's trace, each a descendant of
	// the root. Ingest stores events with the request's trace context (the
	// transcript record carries it in its traceparent header); the trigger
	// continues it from the stored record.
	want := []string{"POST /v1/events", "trigger.decision", "extraction", "chat", "memory.commit", "publish recall.events"}
	var spans []sdktrace.ReadOnlySpan
	polled := false
	defer func() {
		if !polled { // the poll timed out: say what is missing
			t.Logf("trace %s lacks spans %v; has %v", traceID, missingNames(spans, want), telemetrytest.Names(spans))
		}
	}()
	testpoll.Until(t, 10*time.Second, "every span of the trace", func() bool {
		spans = rec.Trace(traceID)
		return len(missingNames(spans, want)) == 0
	})
	polled = true
	for _, s := range spans {
		if !descendsFrom(s, root.SpanContext().SpanID(), spans) {
			t.Errorf("span %q is in the trace but not under the platform's root span", s.Name())
		}
	}
	chat := firstNamed(spans, "chat")
	if v, ok := telemetrytest.Attr(chat, "gen_ai.system"); !ok || v.AsString() == "" {
		t.Errorf("LLM span lacks gen_ai.system: %v", chat.Attributes())
	}

	// A compaction request has its own trace: HTTP edge → NATS → compactor.
	cctx, croot := tracer.Start(context.Background(), "platform.compact")
	creq, _ := http.NewRequestWithContext(cctx, http.MethodPost, p.httpURL+"/v1/sessions/s1/compact", strings.NewReader(`{}`))
	creq.Header.Set("Content-Type", "application/json")
	otel.GetTextMapPropagator().Inject(cctx, propagation.HeaderCarrier(creq.Header))
	cresp, err := http.DefaultClient.Do(creq)
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := io.ReadAll(cresp.Body)
	cresp.Body.Close()
	croot.End()
	if cresp.StatusCode != http.StatusOK {
		t.Fatalf("compact answered %d: %s", cresp.StatusCode, cb)
	}
	var reply events.CompactReply
	if err := json.Unmarshal(cb, &reply); err != nil || reply.Outcome != "session_memory" {
		t.Fatalf("compact reply: outcome %q, err %v: %s", reply.Outcome, err, cb)
	}
	ctrace := rec.WaitFor(t, "compact", 1, 5*time.Second)
	found := false
	for _, s := range ctrace {
		if s.SpanContext().TraceID() == croot.SpanContext().TraceID() {
			found = true
			if v, ok := telemetrytest.Attr(s, telemetry.GenAIConversationCompacted); !ok || !v.AsBool() {
				t.Errorf("compact span %s = %v, want true for a served compaction", telemetry.GenAIConversationCompacted, v)
			}
		}
		if s.SpanContext().TraceID() == traceID {
			t.Error("the compaction joined the publisher's trace")
		}
	}
	if !found {
		t.Fatalf("compactor span not in the compaction request's trace")
	}
}

func missingNames(spans []sdktrace.ReadOnlySpan, want []string) []string {
	var missing []string
	for _, w := range want {
		if firstNamed(spans, w) == nil {
			missing = append(missing, w)
		}
	}
	return missing
}

// firstNamed finds a span whose name is want or starts with want + " ".
func firstNamed(spans []sdktrace.ReadOnlySpan, want string) sdktrace.ReadOnlySpan {
	for _, s := range spans {
		if s.Name() == want || strings.HasPrefix(s.Name(), want+" ") {
			return s
		}
	}
	return nil
}

func descendsFrom(s sdktrace.ReadOnlySpan, root trace.SpanID, spans []sdktrace.ReadOnlySpan) bool {
	for i := 0; i < 64; i++ {
		if s.SpanContext().SpanID() == root {
			return true
		}
		parent := s.Parent().SpanID()
		if parent == root {
			return true
		}
		next, ok := telemetrytest.ParentOf(s, spans)
		if !ok {
			return false
		}
		s = next
	}
	return false
}
