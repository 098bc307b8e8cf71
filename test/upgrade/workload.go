// Package upgrade proves that today's Recall starts on data an earlier
// release wrote. A fixture (testdata/<commit>.tar.gz) is the data
// directory of `recall up` built from an earlier commit, after Write ran a
// fixed workload against it over the HTTP edge, plus what that release
// answered afterwards (Expect, in expect.json). The test unpacks it,
// starts today's `recall up` on it and checks that every answer still
// holds and that new writes work.
//
// Regenerate at each release with
//
//	go run ./test/upgrade/cmd/genfixture --commit <release commit>
//
// (docs/operations.md, "Upgrades"). The workload talks only to the
// documented HTTP API, so it runs against any release that serves it.
package upgrade

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

// The workload's sessions: Ended is extracted, indexed and, at its end,
// committed to User's long-term memory; Open is extracted and indexed and
// still open; Erased was extracted and indexed, then erased.
const (
	SessionEnded  = "upg-ended"
	SessionOpen   = "upg-open"
	SessionErased = "upg-erased"
	User          = "upg-user"
)

// Sessions are the workload's sessions that keep their data.
var Sessions = []string{SessionEnded, SessionOpen}

// Env is the environment both the fixture's writer and the test run
// `recall up` with: the offline provider, and retention long enough that a
// fixture recorded today does not age out of the streams, nor its
// tombstone expire, when the test runs years later. Everything else is at
// its defaults.
var Env = []string{
	"RECALL_LLM_PROVIDER=offline",
	"RECALL_TRANSCRIPT_MAX_AGE=876000h",
	"RECALL_EVENTS_MAX_AGE=876000h",
	"RECALL_ERASE_TOMBSTONE_TTL=876000h",
}

// CompactRequest is the workload's compaction: a keep window small
// enough that the sessions' notes serve it.
var CompactRequest = map[string]any{"min_tokens": 10, "min_text_messages": 1, "max_tokens": 2000}

// Expect is what the release that wrote a fixture answered after the
// workload: the raw JSON (or JSONL) of each read.
type Expect struct {
	Commit     string                     `json:"commit"`
	Written    time.Time                  `json:"written"`
	Exports    map[string]string          `json:"exports"` // session → its JSONL export
	Memory     map[string]json.RawMessage `json:"memory"`
	Index      map[string]json.RawMessage `json:"index"`
	Compaction map[string]json.RawMessage `json:"compaction"`
	LTM        json.RawMessage            `json:"ltm"`
	Config     json.RawMessage            `json:"config"`
	History    json.RawMessage            `json:"history"`
	Erased     json.RawMessage            `json:"erased"` // the erase receipt
}

// API is the edge at Base (open mode: tenant default, no token).
type API struct {
	Base string
	HTTP *http.Client
}

// Call sends body (JSON; nil: none) and returns the status and the body.
func (a API) Call(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.Base+path, r)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := a.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Minute}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// OK is Call that wants a 2xx.
func (a API) OK(ctx context.Context, method, path string, body any) ([]byte, error) {
	code, b, err := a.Call(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	if code/100 != 2 {
		return nil, fmt.Errorf("%s %s: %d %s", method, path, code, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// Publish stores evs through the edge (with the client's retries).
func (a API) Publish(ctx context.Context, evs []event.Event) error {
	cl, err := client.NewHTTP(client.HTTPConfig{URL: a.Base})
	if err != nil {
		return err
	}
	_, err = cl.PublishBatch(ctx, evs)
	return err
}

// Conversation is a session's events: its start (for User), turns of a
// user request, a tool call with its result and an answer, and, when end,
// its end. prefix makes the ids of a later call distinct.
func Conversation(session, prefix string, turns int, end bool) []event.Event {
	s := eventtest.NewSession("", session)
	var evs []event.Event
	if prefix == "" {
		evs = append(evs, s.Started("start", events.SessionStarted{UserID: User, AgentID: "upgrade",
			MemoryPolicy: &events.MemoryPolicy{Self: events.PolicyTarget{Enabled: true}}}))
	}
	for i := range turns {
		id := fmt.Sprintf("%s%d", prefix, i)
		tool := "toolu_" + session + "_" + id
		evs = append(evs,
			s.User("u"+id, fmt.Sprintf("I prefer short answers. Turn %s of %s: add the --by-month flag to the report and run the tests.", id, session)),
			s.ToolUse("t"+id, tool, "Bash", `{"command":"go test ./report/..."}`),
			s.ToolResult("r"+id, tool, fmt.Sprintf("ok  \treport\t0.%02ds\n%s", i, strings.Repeat("=== RUN TestByMonth --- PASS\n", 40)), false),
			s.Assistant("a"+id, fmt.Sprintf("Done: --by-month is added (turn %s) and the tests pass. We decided to keep the CSV output.", id)))
	}
	if end {
		evs = append(evs, s.Ended("end"))
	}
	return evs
}

// Write runs the fixed workload against the edge and returns what the
// edge answered afterwards.
func Write(ctx context.Context, a API) (*Expect, error) {
	for _, step := range []func(context.Context, API) error{writeConfig, writeSessions, waitCommitted} {
		if err := step(ctx, a); err != nil {
			return nil, err
		}
	}
	x := &Expect{Written: time.Now().UTC()}
	var err error
	if x.Erased, err = a.OK(ctx, http.MethodDelete, "/v1/sessions/"+SessionErased, nil); err != nil {
		return nil, err
	}
	if err := x.read(ctx, a, Sessions); err != nil {
		return nil, err
	}
	return x, nil
}

// writeConfig stores a tenant configuration, then changes it: two
// revisions, so the history has two entries.
func writeConfig(ctx context.Context, a API) error {
	cfg := map[string]any{"minimum_message_tokens_to_init": 200, "minimum_tokens_between_update": 100, "tool_calls_between_updates": 2}
	if _, err := a.OK(ctx, http.MethodPut, "/v1/config", cfg); err != nil {
		return err
	}
	_, err := a.OK(ctx, http.MethodPatch, "/v1/config", map[string]any{"tool_calls_between_updates": 3})
	return err
}

// writeSessions stores the three sessions and extracts and indexes each.
func writeSessions(ctx context.Context, a API) error {
	for _, s := range []struct {
		id  string
		end bool
	}{{SessionEnded, true}, {SessionOpen, false}, {SessionErased, false}} {
		if err := a.Publish(ctx, Conversation(s.id, "", 12, s.end)); err != nil {
			return fmt.Errorf("writing %s: %w", s.id, err)
		}
		if _, err := a.OK(ctx, http.MethodPost, "/v1/sessions/"+s.id+"/extract", map[string]any{"timeout_ms": 60000}); err != nil {
			return err
		}
		if _, err := a.OK(ctx, http.MethodPost, "/v1/sessions/"+s.id+"/index", nil); err != nil {
			return err
		}
	}
	return nil
}

// waitCommitted waits until the ended session's long-term commit wrote
// the user's memory.
func waitCommitted(ctx context.Context, a API) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		b, err := a.OK(ctx, http.MethodGet, "/v1/users/"+User+"/memory", nil)
		var r events.LTMReply
		if err == nil && json.Unmarshal(b, &r) == nil && len(r.Documents) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no long-term memory for %s 90s after %s ended (last: %v %s)", User, SessionEnded, err, b)
		}
		if !retry.Pause(ctx.Done(), 250*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// SessionNew is the session WriteMore starts.
const SessionNew = "upg-new"

// WriteMore is what a release writes on an earlier one's data: a new
// session, four more turns of SessionOpen, and an extraction of each.
func WriteMore(ctx context.Context, a API) error {
	if err := a.Publish(ctx, Conversation(SessionNew, "", 12, false)); err != nil {
		return err
	}
	if err := a.Publish(ctx, Conversation(SessionOpen, "later", 4, false)); err != nil {
		return err
	}
	for _, s := range []string{SessionNew, SessionOpen} {
		var r events.ExtractResult
		b, err := a.OK(ctx, http.MethodPost, "/v1/sessions/"+s+"/extract", map[string]any{"timeout_ms": 60000})
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err != nil || !r.Success {
			return fmt.Errorf("extracting %s: %v %s", s, err, b)
		}
	}
	return nil
}

// Read records the answers about sessions, the user and the tenant.
func Read(ctx context.Context, a API, sessions []string) (*Expect, error) {
	x := &Expect{Written: time.Now().UTC()}
	return x, x.read(ctx, a, sessions)
}

// read records every answer the test compares.
func (x *Expect) read(ctx context.Context, a API, sessions []string) error {
	x.Exports, x.Memory, x.Index, x.Compaction = map[string]string{}, map[string]json.RawMessage{}, map[string]json.RawMessage{}, map[string]json.RawMessage{}
	get := func(path string) (json.RawMessage, error) { return a.OK(ctx, http.MethodGet, path, nil) }
	for _, s := range sessions {
		b, err := get("/v1/sessions/" + s + "/export")
		if err != nil {
			return err
		}
		x.Exports[s] = string(b)
		if x.Memory[s], err = get("/v1/sessions/" + s + "/memory"); err != nil {
			return err
		}
		if x.Index[s], err = get("/v1/sessions/" + s + "/index"); err != nil {
			return err
		}
		if x.Compaction[s], err = a.OK(ctx, http.MethodPost, "/v1/sessions/"+s+"/compact", CompactRequest); err != nil {
			return err
		}
	}
	var err error
	if x.LTM, err = get("/v1/users/" + User + "/memory"); err != nil {
		return err
	}
	if x.Config, err = get("/v1/config"); err != nil {
		return err
	}
	x.History, err = get("/v1/config/history")
	return err
}
