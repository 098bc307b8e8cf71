package compactorsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/testpoll"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

const tenant = "acme"

// env is a running compactor on an embedded JetStream.
type env struct {
	t      *testing.T
	nc     *nats.Conn
	js     jetstream.JetStream
	cl     *client.Client
	mem    jetstream.KeyValue
	status jetstream.KeyValue
	layout events.Layout // the transcript's shards
	n      int           // events published, for unique ids
	// stopRun cancels Run and returns its error (once; later calls return
	// the same).
	stopRun func() error
}

type envOptions struct {
	server *server.Options
	config func(*Config)
	// before runs after provisioning, before the service starts.
	before func(*env)
}

func startEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	if o.server == nil {
		o.server = &server.Options{}
	}
	s := natstest.StartWith(t, o.server)
	nc, js := s.Connect(t)
	pc := provision.Config{Partitions: 2, MemoryStorage: true}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := provision.Ensure(ctx, js, pc); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, nc: nc, js: js, layout: pc.Layout()}
	e.cl, _ = client.New(js, tenant)
	e.mem, _ = js.KeyValue(ctx, events.BucketMemory)
	e.status, _ = js.KeyValue(ctx, events.BucketStatus)
	if o.before != nil {
		o.before(e)
	}
	cfg := Config{NATS: natsconn.Config{URL: s.ClientURL()}, Config: pc, FullCompact: false}
	if o.config != nil {
		o.config(&cfg)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(rctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	var once sync.Once
	var runErr error
	e.stopRun = func() error {
		once.Do(func() {
			stop()
			select {
			case runErr = <-done:
			case <-time.After(20 * time.Second):
				runErr = errors.New("Run did not return 20 s after cancel")
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := e.stopRun(); err != nil {
			t.Errorf("Run returned %v", err)
		}
	})
	testpoll.Until(t, 10*time.Second, "the compactor to answer discovery", func() bool {
		select {
		case err := <-done:
			done <- err // for stopRun
			t.Fatalf("Run: %v", err)
		default:
		}
		_, err := nc.Request("$SRV.PING."+ServiceName, nil, time.Second)
		return err == nil
	})
	return e
}

// rec describes one transcript record to publish.
type rec struct {
	role, text  string
	use, result string // tool_use id / tool_result id
	size        int    // tokens of the tool payload
	msgID       string
	compacted   bool
	keptHead    string // compacted: the first record the platform kept
}

func filler(n int) string { return strings.Repeat("abcd", n) }

// publish stores records of session and returns their uuids and seqs.
func (e *env) publish(session string, recs ...rec) (uuids []string, seqs []uint64) {
	e.t.Helper()
	evs := make([]event.Event, len(recs))
	for i, r := range recs {
		e.n++
		id := fmt.Sprintf("%s-%d", session, e.n)
		ev := event.New()
		ev.SetID(id)
		ev.SetSource("test")
		ev.SetSubject(session)
		if r.compacted {
			ev.SetType(events.TypeSessionCompacted)
			_ = ev.SetData("application/json", events.SessionCompacted{PreTokens: 150000, PostTokens: 20000, FirstKeptUUID: r.keptHead})
		} else {
			m := events.Message{UUID: id, Role: r.role, MessageID: r.msgID}
			if r.text != "" {
				m.Content = append(m.Content, events.Block{Type: events.BlockText, Text: r.text})
			}
			if r.use != "" {
				in, _ := json.Marshal(map[string]string{"command": filler(r.size)})
				m.Content = append(m.Content, events.Block{Type: events.BlockToolUse, ID: r.use, Name: "Bash", Input: in})
			}
			if r.result != "" {
				m.Content = append(m.Content, events.Block{Type: events.BlockToolResult, ToolUseID: r.result,
					Content: events.Content{{Type: events.BlockText, Text: filler(r.size)}}})
			}
			ev.SetType(events.TypeMessage)
			_ = ev.SetData("application/json", m)
		}
		evs[i] = ev
		uuids = append(uuids, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := e.cl.PublishBatch(ctx, evs)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, r := range res {
		seqs = append(seqs, r.Seq)
	}
	return uuids, seqs
}

var turnCounter atomic.Int64

// conversation is a coding-session-like run of turns: a request, a tool
// call and its result, an answer.
func conversation(turns, resultTokens int) []rec {
	var out []rec
	for range turns {
		i := turnCounter.Add(1) // unique message and tool ids
		out = append(out,
			rec{role: events.RoleUser, text: fmt.Sprintf("request %d: %s", i, filler(200))},
			rec{role: events.RoleAssistant, msgID: fmt.Sprintf("msg_%d", i), use: fmt.Sprintf("toolu_%d", i), size: 20},
			rec{role: events.RoleUser, result: fmt.Sprintf("toolu_%d", i), size: resultTokens},
			rec{role: events.RoleAssistant, msgID: fmt.Sprintf("msg_%d_b", i), text: fmt.Sprintf("answer %d: %s", i, filler(300))},
		)
	}
	return out
}

func (e *env) putMemory(session string, r events.MemoryRecord) uint64 {
	e.t.Helper()
	b, _ := json.Marshal(r)
	rev, err := e.mem.Put(context.Background(), events.MemoryKey(tenant, session), b)
	if err != nil {
		e.t.Fatal(err)
	}
	return rev
}

func notes(s string) string {
	return strings.Replace(memory.DefaultTemplate, "# Current State\n_What is actively being worked on right now? Pending tasks not yet completed. Immediate next steps._\n",
		"# Current State\n_What is actively being worked on right now? Pending tasks not yet completed. Immediate next steps._\n"+s+"\n", 1)
}

// compact sends a request and decodes the reply.
func (e *env) compact(session string, req any) *events.CompactReply {
	e.t.Helper()
	r, err := e.tryCompact(session, req)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) tryCompact(session string, req any) (*events.CompactReply, error) {
	var body []byte
	switch v := req.(type) {
	case nil:
	case string:
		body = []byte(v)
	default:
		body, _ = json.Marshal(v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := chunked.Request(ctx, e.nc, events.APISubject(events.VerbCompact, tenant, session), nil, body)
	if err != nil {
		return nil, err
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		return nil, fmt.Errorf("service error %s: %s", code, m.Header.Get("Nats-Service-Error"))
	}
	var r events.CompactReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return nil, fmt.Errorf("decoding reply (%d bytes): %w", len(m.Data), err)
	}
	return &r, nil
}

func keptUUIDs(t *testing.T, r *events.CompactReply) []string {
	t.Helper()
	var out []string
	for _, e := range r.Kept {
		var m events.Message
		if err := json.Unmarshal(e.Data(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m.UUID)
	}
	return out
}
