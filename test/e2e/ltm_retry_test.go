package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/llm/llmtest"
	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/longterm/longtermsvc"
)

// factModel is a fake Anthropic API (through the real SDK) that writes
// every FACT-<n> of the batch it is shown into the user's preferences, and
// answers 529 (overloaded) while failing says so. It counts its calls.
type factModel struct {
	fake    *llmtest.Server
	failing atomic.Int64 // calls still to fail; < 0: fail until set again
	calls   atomic.Int64
	mu      sync.Mutex
	shown   map[string]int // fact → times the model was shown it
}

var factRE = regexp.MustCompile(`FACT-\d+`)

func newFactModel(t *testing.T, failFirst int64) (*factModel, llm.Provider) {
	f := &factModel{shown: map[string]int{}}
	f.failing.Store(failFirst)
	f.fake = llmtest.NewAnthropic(t)
	f.fake.SetResponder(func(_ int, body []byte) llmtest.Reply {
		f.calls.Add(1)
		if n := f.failing.Load(); n != 0 {
			f.failing.Add(-1)
			if n < 0 {
				f.failing.Store(-1)
			}
			return llmtest.Reply{Status: 529}
		}
		if strings.Contains(string(body), `"tool_result"`) {
			return llmtest.Reply{Text: "Done."}
		}
		var req struct {
			Messages []struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(body, &req)
		var facts []string
		f.mu.Lock()
		for _, m := range req.Messages {
			for _, c := range m.Content {
				for _, fact := range factRE.FindAllString(c.Text, -1) {
					f.shown[fact]++
					facts = append(facts, "- Prefers "+fact+".")
				}
			}
		}
		f.mu.Unlock()
		if len(facts) == 0 {
			return llmtest.Reply{Text: "Nothing durable."}
		}
		in, _ := json.Marshal(map[string]string{"type": "preferences", "content": strings.Join(facts, "\n")})
		return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: llm.MemoryWriteTool, Input: string(in)}}}
	})
	return f, llm.NewAnthropic(llm.ClientOptions{APIKey: "test", BaseURL: f.fake.BaseURL(), Model: "claude-haiku-4-5"})
}

// startLTMWith runs ingest and one long-term memory replica configured by
// cfg (NATS, provisioning, provider and id filled in).
func startLTMWith(t *testing.T, provider llm.Provider, cfg longtermsvc.Config) *indexStack {
	t.Helper()
	e := startEdge(t, 2)
	cfg.NATS, cfg.Config, cfg.Provider, cfg.ID, cfg.HeartbeatTTL = e.ncfg, e.prov, provider, "lt-1", 2*time.Second
	e.run(func(ctx context.Context) error { return longtermsvc.Run(ctx, cfg, e.log) })
	e.ping(t, longtermsvc.ServiceName)
	return e.indexStack
}

// commitLog gathers memory.committed notifications of every session.
type commitLog struct {
	mu  sync.Mutex
	all []events.MemoryCommitted
}

func watchCommits(t *testing.T, nc *nats.Conn) *commitLog {
	t.Helper()
	l := &commitLog{}
	sub, err := nc.Subscribe(events.EventsSubject(events.KindMemoryCommitted, "*", "*"), func(m *nats.Msg) {
		var out events.MemoryCommitted
		if json.Unmarshal(m.Data, &out) == nil {
			l.mu.Lock()
			l.all = append(l.all, out)
			l.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return l
}

// succeeded returns the session's successful commits, in order.
func (l *commitLog) succeeded(session string) []events.MemoryCommitted {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []events.MemoryCommitted
	for _, c := range l.all {
		if c.Session == session && c.Success {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FromSeq < out[j].FromSeq })
	return out
}

// factSession is a session of user u1 stating facts FACT-<from>… one per
// message (pad characters each), ended.
func factSession(session string, from, n, pad int) []map[string]any {
	evs := []map[string]any{lifecycleEvent(session, "start", events.TypeSessionStarted, events.SessionStarted{UserID: "u1"})}
	evs = append(evs, factMessages(session, from, n, pad)...)
	return append(evs, lifecycleEvent(session, "end", events.TypeSessionEnded, events.SessionEnded{}))
}

func factMessages(session string, from, n, pad int) []map[string]any {
	var evs []map[string]any
	for i := from; i < from+n; i++ {
		evs = append(evs, said(session, fmt.Sprintf("m%d", i), "", fmt.Sprintf("I prefer FACT-%d. %s", i, strings.Repeat("z", pad))))
	}
	return evs
}

// waitFacts waits until u1's preferences hold FACT-<from>…FACT-<from+n-1>.
func waitFacts(t *testing.T, s *indexStack, from, n int) {
	t.Helper()
	var prefs string
	testpoll.Until(t, 60*time.Second, "u1's long-term memory holds every fact of the session", func() bool {
		prefs = docs(s.userMemory(t, "u1"))["self/preferences"]
		for i := from; i < from+n; i++ {
			if !strings.Contains(prefs, fmt.Sprintf("FACT-%d.", i)) {
				return false
			}
		}
		return true
	})
}

// TestLongTermCommitRetriedUntilTheModelRecovers: the model is overloaded
// for the first three calls; the session's commit is tried again with
// backoff until it goes through, and the session's memory is all there.
func TestLongTermCommitRetriedUntilTheModelRecovers(t *testing.T) {
	model, provider := newFactModel(t, 3)
	s := startLTMWith(t, provider, longtermsvc.Config{MaxAttempts: 5, RetryBackoff: 50 * time.Millisecond, Timeout: 20 * time.Second})
	s.post(t, factSession("rt1", 1, 3, 0))
	waitFacts(t, s, 1, 3)
	if got := model.calls.Load(); got < 4 {
		t.Fatalf("the model was called %d times, want 3 failures and then the commit", got)
	}
	list, err := parked.ListCommits(context.Background(), s.js)
	if err != nil || len(list) != 0 {
		t.Fatalf("parked commits: %+v, %v", list, err)
	}
}

// TestLongTermCommitParkedThenReplayed: a model that keeps failing gets the
// commit parked after MaxAttempts tries, with the batch left uncommitted;
// it is listed, and once the model recovers a replay commits the session.
func TestLongTermCommitParkedThenReplayed(t *testing.T) {
	model, provider := newFactModel(t, -1)
	s := startLTMWith(t, provider, longtermsvc.Config{MaxAttempts: 3, RetryBackoff: 50 * time.Millisecond, Timeout: 20 * time.Second})
	s.post(t, factSession("pk1", 1, 2, 0))
	ctx := context.Background()
	var list []parked.Commit
	testpoll.Until(t, 60*time.Second, "the failing commit is parked", func() bool {
		list, _ = parked.ListCommits(ctx, s.js)
		return len(list) == 1
	})
	p := list[0]
	if p.Tenant == "" || p.User != "u1" || p.Session != "pk1" || p.Attempts != 3 || !strings.Contains(p.Error, "529") {
		t.Fatalf("parked commit: %+v", p)
	}
	if got := model.calls.Load(); got != 3 {
		t.Fatalf("the model was called %d times before parking, want 3", got)
	}
	if got := docs(s.userMemory(t, "u1")); len(got) != 0 {
		t.Fatalf("memory written by a failed commit: %v", got)
	}
	model.failing.Store(0)
	n, err := parked.ReplayCommits(ctx, s.js, parked.Filter{Session: "pk1"})
	if err != nil || n != 1 {
		t.Fatalf("replayed %d, %v", n, err)
	}
	waitFacts(t, s, 1, 2)
	if list, err := parked.ListCommits(ctx, s.js); err != nil || len(list) != 0 {
		t.Fatalf("still parked after the replay: %+v, %v", list, err)
	}
}

// TestLongTermBatchOverTheLimitCommitsInParts: a session longer than
// RECALL_LONGTERM_MAX_BATCH_CHARS is committed in consecutive parts that
// together cover every record, and the model saw every message once.
func TestLongTermBatchOverTheLimitCommitsInParts(t *testing.T) {
	model, provider := newFactModel(t, 0)
	s := startLTMWith(t, provider, longtermsvc.Config{MaxBatch: 2000, Timeout: 20 * time.Second})
	log := watchCommits(t, s.nc)
	s.post(t, factSession("big1", 1, 12, 400))
	waitFacts(t, s, 1, 12)
	var parts []events.MemoryCommitted
	testpoll.Until(t, 30*time.Second, "the parts reach the session's end", func() bool {
		parts = log.succeeded("big1")
		return len(parts) > 0 && parts[len(parts)-1].ToSeq >= parts[0].FromSeq+13
	})
	if len(parts) < 3 {
		t.Fatalf("%d commits, want the 12 messages of ~430 characters in parts of at most 2,000", len(parts))
	}
	for i := 1; i < len(parts); i++ {
		if parts[i].FromSeq != parts[i-1].ToSeq+1 {
			t.Fatalf("part %d starts at %d, the one before ended at %d", i, parts[i].FromSeq, parts[i-1].ToSeq)
		}
	}
	model.mu.Lock()
	defer model.mu.Unlock()
	for i := 1; i <= 12; i++ {
		if n := model.shown[fmt.Sprintf("FACT-%d", i)]; n != 1 {
			t.Errorf("FACT-%d was shown to the model %d times, want once", i, n)
		}
	}
}

// TestLongTermUserFoundAfterRecord32: a session whose session.started
// comes after 40 records is still committed for its user.
func TestLongTermUserFoundAfterRecord32(t *testing.T) {
	_, provider := newFactModel(t, 0)
	s := startLTMWith(t, provider, longtermsvc.Config{Timeout: 20 * time.Second})
	evs := factMessages("late1", 1, 40, 0)
	evs = append(evs, lifecycleEvent("late1", "start", events.TypeSessionStarted, events.SessionStarted{UserID: "u1"}))
	evs = append(evs, factMessages("late1", 41, 2, 0)...)
	s.post(t, append(evs, lifecycleEvent("late1", "end", events.TypeSessionEnded, events.SessionEnded{})))
	waitFacts(t, s, 1, 42)
}
