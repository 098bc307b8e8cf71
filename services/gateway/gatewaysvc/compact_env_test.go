package gatewaysvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/compactor/compactorsvc"
	"github.com/recallhq/recall/services/gateway/gatewaytest"
	"github.com/recallhq/recall/services/gateway/wire"
)

// compactEnv is a gateway attached to a real compactor on an embedded
// JetStream, in front of the scripted upstream. What capture would store
// is published by the test itself (stored), so the compactor has a
// transcript and a memory to serve from.
type compactEnv struct {
	t    *testing.T
	g    *Gateway
	url  string
	up   *gatewaytest.Upstream
	nc   *nats.Conn
	js   jetstream.JetStream
	cl   *client.Client
	logs *syncBuffer
}

func startCompactEnv(t *testing.T) *compactEnv {
	t.Helper()
	s := natstest.Start(t)
	nc, js := s.Connect(t)
	pc := provision.Config{Partitions: 1, MemoryStorage: true}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := provision.Ensure(ctx, js, pc); err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- compactorsvc.Run(rctx, compactorsvc.Config{NATS: natsconn.Config{URL: s.ClientURL()}, Config: pc},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("compactor: %v", err)
		}
	})
	testpoll.Until(t, 10*time.Second, "the compactor serves", func() bool {
		_, err := nc.Request("$SRV.PING."+compactorsvc.ServiceName, nil, time.Second)
		return err == nil
	})
	up := gatewaytest.New(gatewaytest.Script{ToolCalls: 1000})
	usrv := httptest.NewServer(up)
	t.Cleanup(usrv.Close)
	g, gw, logs := newGateway(t, usrv.URL, nil)
	g.Attach(t.Context(), nc, js)
	wctx, wcancel := context.WithCancel(context.Background())
	t.Cleanup(wcancel)
	if err := g.AttachConfig(wctx, js); err != nil {
		t.Fatal(err)
	}
	cl, _ := client.New(js, ingestDefaultTenant)
	return &compactEnv{t: t, g: g, url: gw, up: up, nc: nc, js: js, cl: cl, logs: logs}
}

// ingestDefaultTenant is the tenant of a gateway without RECALL_TENANTS.
const ingestDefaultTenant = "default"

// stored publishes msgs of session as capture would (records with the ids
// of wire.RecordIDs) and gives the session a memory whose notes cover the
// records up to and including msgs[summarized].
func (e *compactEnv) stored(session string, msgs []wire.Msg, summarized int) {
	e.t.Helper()
	ids := wire.RecordIDs(session, msgs)
	sess := eventtest.NewSession(ingestDefaultTenant, session)
	var evs []event.Event
	for i := range msgs {
		if ids[i] == "" {
			continue
		}
		m := msgs[i].Message
		m.UUID = ids[i]
		m.Content = slices.DeleteFunc(slices.Clone(m.Content), func(b events.Block) bool { return b.Type == wire.TypeCompaction })
		if len(m.Content) == 0 {
			continue
		}
		evs = append(evs, sess.Message(ids[i], m))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.cl.PublishBatch(ctx, evs); err != nil {
		e.t.Fatal(err)
	}
	notes := strings.Replace(memory.DefaultTemplate, "# Current State\n_What is actively being worked on right now? Pending tasks not yet completed. Immediate next steps._\n",
		"# Current State\n_What is actively being worked on right now? Pending tasks not yet completed. Immediate next steps._\nAuditing the ledgers; RECALL-NOTES-MARK.\n", 1)
	rec := events.MemoryRecord{Notes: notes, LastSummarizedID: ids[summarized]}
	b, _ := json.Marshal(rec)
	kv, err := e.js.KeyValue(ctx, events.BucketMemory)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := kv.Put(ctx, events.MemoryKey(ingestDefaultTenant, session), b); err != nil {
		e.t.Fatal(err)
	}
}

// setConfig puts the default tenant's gateway section and waits until the
// gateway sees it.
func (e *compactEnv) setConfig(g *events.GatewayConfig) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tenantcfg.Put(ctx, e.js, ingestDefaultTenant, events.TenantConfig{Gateway: g}); err != nil {
		e.t.Fatal(err)
	}
	testpoll.Until(e.t, 10*time.Second, "the gateway sees the config", func() bool {
		got := e.g.gatewayConfig(ingestDefaultTenant)
		return (g == nil && got.CompactAboveTokens == 0) || (g != nil && got.CompactAboveTokens == g.CompactAboveTokens)
	})
}

// ledgerHistory is a conversation of n tool calls with ~40 KB results
// (10k tokens each), ending with a user turn, as the SDK checks send.
func ledgerHistory(tag string, n int) []map[string]any {
	msgs := []map[string]any{{"role": "user", "content": fmt.Sprintf("Audit the %s ledgers.", tag)}}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("toolu_%s_%d", tag, i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("Reading ledger %d.", i)},
				map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]string{"command": fmt.Sprintf("cat ledger%d.txt", i)}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id,
				"content": fmt.Sprintf("ledger %d (%s): ", i, tag) + strings.Repeat(fmt.Sprintf("entry %d balanced; ", i), 2200)}}})
	}
	last := msgs[len(msgs)-1]
	last["content"] = append(last["content"].([]any), map[string]any{"type": "text", "text": "Go on with the audit."})
	return msgs
}

// wireMsgs decodes msgs as a request's messages.
func wireMsgs(t *testing.T, msgs []map[string]any) []wire.Msg {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 8, "messages": msgs})
	r, err := wire.DecodeMessages(b)
	if err != nil {
		t.Fatal(err)
	}
	return r.Messages
}

// sentMessages is the messages of the upstream's requests after the first n.
func (e *compactEnv) sentSince(n int) []gatewaytest.Request {
	reqs := e.up.Requests()
	if n > len(reqs) {
		return nil
	}
	return reqs[n:]
}

var errNotJSON = errors.New("not JSON")
