// Package extractortest holds test doubles and checkers for the extractor:
// a deterministic model that edits the notes through the real Edit tool, a
// detector of overlapping extractions per session, and a watcher that flags
// a session's coveredSeq moving backwards. The extractor's tests and the
// benchmark use them.
package extractortest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// WorklogDescription is the Worklog section's italic description line of
// the default template; EditProvider appends below it.
const WorklogDescription = "_Step by step, what was attempted, done? Very terse summary for each step_"

// EditProvider is a deterministic llm.Provider. On a request whose last
// message carries no tool result it answers with one Edit of req.NotesPath
// that adds a worklog line below the Worklog description (so it works on
// the template and on any notes derived from it); after a tool result it
// answers with text only, which ends the edit loop. It is safe for
// concurrent use.
type EditProvider struct {
	// Delay is how long each call takes (honouring ctx).
	Delay time.Duration
	// Fail, when set, may return an error (or a text-only answer by
	// returning ErrMalformedEdit) for a request instead of the edit.
	Fail func(req llm.Request) error

	calls atomic.Int64
}

// ErrMalformedEdit makes EditProvider answer with an Edit call whose input
// is not a valid edit (the model failed; a text answer would mean "nothing
// to change", which is a success).
var ErrMalformedEdit = errors.New("answer with a malformed edit")

// Name implements llm.Provider.
func (p *EditProvider) Name() string { return "test" }

// Model implements llm.Provider.
func (p *EditProvider) Model() string { return "edit-1" }

// Calls is the number of Complete calls so far.
func (p *EditProvider) Calls() int { return int(p.calls.Load()) }

// Complete implements llm.Provider.
func (p *EditProvider) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	n := p.calls.Add(1)
	if p.Delay > 0 {
		t := time.NewTimer(p.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	usage := events.TokenUsage{InputTokens: 100, OutputTokens: 10}
	if p.Fail != nil {
		if err := p.Fail(req); errors.Is(err, ErrMalformedEdit) {
			bad := llm.ToolCall{ID: "bad", Name: memory.EditToolName, Input: json.RawMessage(`{"file_path":"` + req.NotesPath + `"}`)}
			return &llm.Response{ToolCalls: []llm.ToolCall{bad}, StopReason: "tool_use", Model: p.Model(), Usage: usage}, nil
		} else if err != nil {
			return nil, err
		}
	}
	if last := lastMessage(req); last != nil && hasToolResult(last) {
		return &llm.Response{Text: "done", StopReason: "end_turn", Model: p.Model(), Usage: usage}, nil
	}
	input, _ := json.Marshal(memory.EditInput{
		FilePath:  req.NotesPath,
		OldString: WorklogDescription,
		NewString: WorklogDescription + fmt.Sprintf("\n- step %d (%d messages seen)", n, len(req.Messages)),
	})
	return &llm.Response{
		ToolCalls:  []llm.ToolCall{{ID: fmt.Sprintf("call_%d", n), Name: memory.EditToolName, Input: input}},
		StopReason: "tool_use", Model: p.Model(), Usage: usage,
	}, nil
}

func lastMessage(req llm.Request) *events.Message {
	if len(req.Messages) == 0 {
		return nil
	}
	return &req.Messages[len(req.Messages)-1]
}

func hasToolResult(m *events.Message) bool {
	for _, b := range m.Content {
		if b.Type == events.BlockToolResult {
			return true
		}
	}
	return false
}

// Detector wraps a provider and records, per session (the request's
// NotesPath), when each call begins and ends. Two calls of one session that
// overlap in time are an ordering violation: the extractor promises at most
// one extraction per session at a time.
type Detector struct {
	llm.Provider

	mu       sync.Mutex
	active   map[string]int
	calls    map[string]int
	total    int
	overlaps []string
}

// NewDetector wraps p.
func NewDetector(p llm.Provider) *Detector {
	return &Detector{Provider: p, active: map[string]int{}, calls: map[string]int{}}
}

// Complete implements llm.Provider.
func (d *Detector) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	key := req.NotesPath
	d.mu.Lock()
	if d.active[key] > 0 {
		d.overlaps = append(d.overlaps, fmt.Sprintf("%s: call began while %d other(s) were running (at %s)", key, d.active[key], time.Now().Format(time.StampMicro)))
	}
	d.active[key]++
	d.calls[key]++
	d.total++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.active[key]--
		d.mu.Unlock()
	}()
	return d.Provider.Complete(ctx, req)
}

// Overlaps lists every violation seen.
func (d *Detector) Overlaps() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.overlaps...)
}

// Calls is the number of calls made for the session of tenant and session.
func (d *Detector) Calls(tenant, session string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[memory.NotesPath(tenant, session)]
}

// Total is the number of calls made.
func (d *Detector) Total() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total
}

// CoveredWatcher watches RECALL_MEMORY and flags any session whose
// CoveredSeq (or LastSummarizedSeq) moves backwards between revisions.
type CoveredWatcher struct {
	mu         sync.Mutex
	covered    map[string]uint64
	violations []string
	updates    int
}

// WatchCovered starts watching until ctx is done.
func WatchCovered(ctx context.Context, js jetstream.JetStream) (*CoveredWatcher, error) {
	kv, err := js.KeyValue(ctx, events.BucketMemory)
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, err
	}
	cw := &CoveredWatcher{covered: map[string]uint64{}}
	lastSummarized := map[string]uint64{}
	go func() {
		defer w.Stop()
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var rec events.MemoryRecord
			if err := json.Unmarshal(e.Value(), &rec); err != nil {
				continue
			}
			cw.mu.Lock()
			cw.updates++
			if prev, ok := cw.covered[e.Key()]; ok && rec.CoveredSeq < prev {
				cw.violations = append(cw.violations, fmt.Sprintf("%s: coveredSeq went from %d to %d at revision %d", e.Key(), prev, rec.CoveredSeq, e.Revision()))
			}
			if prev := lastSummarized[e.Key()]; rec.LastSummarizedSeq < prev {
				cw.violations = append(cw.violations, fmt.Sprintf("%s: lastSummarizedSeq went from %d to %d at revision %d", e.Key(), prev, rec.LastSummarizedSeq, e.Revision()))
			}
			cw.covered[e.Key()] = rec.CoveredSeq
			lastSummarized[e.Key()] = rec.LastSummarizedSeq
			cw.mu.Unlock()
		}
	}()
	return cw, nil
}

// Violations lists every backwards move seen.
func (c *CoveredWatcher) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.violations...)
}

// Covered is the last CoveredSeq seen for key.
func (c *CoveredWatcher) Covered(key string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.covered[key]
}
