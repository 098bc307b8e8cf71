package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// slowProvider delays every model call, so commits of one user would
// overlap if they were not kept one at a time.
type slowProvider struct {
	llm.Provider
	delay time.Duration
}

func (p slowProvider) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	select {
	case <-time.After(p.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p.Provider.Complete(ctx, req)
}

// commitSeen is a memory.committed notification and when it arrived.
type commitSeen struct {
	out events.MemoryCommitted
	at  time.Time
}

// collectCommits gathers memory.committed notifications by session.
func collectCommits(t *testing.T, nc *nats.Conn) (wait func(sessions []string) map[string]commitSeen) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]commitSeen{}
	sub, err := nc.Subscribe(events.EventsSubject(events.KindMemoryCommitted, "*", "*"), func(m *nats.Msg) {
		var out events.MemoryCommitted
		if json.Unmarshal(m.Data, &out) == nil {
			mu.Lock()
			seen[out.Session] = commitSeen{out: out, at: time.Now()}
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return func(sessions []string) map[string]commitSeen {
		t.Helper()
		out := map[string]commitSeen{}
		testpoll.Until(t, 60*time.Second, fmt.Sprintf("a commit of each of %d sessions", len(sessions)), func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range sessions {
				if _, ok := seen[s]; !ok {
					return false
				}
			}
			maps.Copy(out, seen)
			return true
		})
		return out
	}
}

// endedSession is a short session of user, ended.
func endedSession(session, user string) []map[string]any {
	return []map[string]any{
		lifecycleEvent(session, "start", events.TypeSessionStarted, events.SessionStarted{UserID: user, MemoryPolicy: policy(true, false)}),
		said(session, "m1", "", "I prefer short answers."),
		lifecycleEvent(session, "end", events.TypeSessionEnded, events.SessionEnded{}),
	}
}

// TestLongTermMemoryScalesOutByUser: commits spread over the replicas by
// user, one at a time per user, and a replica that stops hands its users
// to the others without losing a commit.
func TestLongTermMemoryScalesOutByUser(t *testing.T) {
	s, stop := startLTMReplicas(t, slowProvider{Provider: llm.NewOffline(), delay: 150 * time.Millisecond}, 4, "lt-a", "lt-b")
	wait := collectCommits(t, s.nc)

	// 16 users with one session each, and one user with four sessions
	// that all end at once.
	var sessions, many []string
	var evs []map[string]any
	for i := range 16 {
		id := fmt.Sprintf("sc%02d", i)
		sessions = append(sessions, id)
		evs = append(evs, endedSession(id, fmt.Sprintf("user%02d", i))...)
	}
	for i := range 4 {
		id := fmt.Sprintf("many%d", i)
		many = append(many, id)
		evs = append(evs, endedSession(id, "busy")...)
	}
	s.post(t, evs)
	got := wait(append(append([]string(nil), sessions...), many...))
	byWorker := map[string]int{}
	for _, c := range got {
		if !c.out.Success {
			t.Errorf("commit of %s failed: %s", c.out.Session, c.out.Error)
		}
		byWorker[c.out.Worker]++
	}
	if byWorker["lt-a"] == 0 || byWorker["lt-b"] == 0 || byWorker["lt-a"]+byWorker["lt-b"] != 20 {
		t.Fatalf("commits by replica: %v (want both replicas working, 20 in all)", byWorker)
	}
	t.Logf("commits by replica: %v", byWorker)

	// The busy user's commits ran on one replica, one after the other.
	type span struct{ from, to time.Time }
	var spans []span
	workers := map[string]bool{}
	for _, id := range many {
		c := got[id]
		workers[c.out.Worker] = true
		spans = append(spans, span{c.at.Add(-time.Duration(c.out.DurationMS) * time.Millisecond), c.at})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].from.Before(spans[j].from) })
	for i := 1; i < len(spans); i++ {
		if spans[i].from.Before(spans[i-1].to.Add(-20 * time.Millisecond)) {
			t.Fatalf("two commits of one user overlapped: %v", spans)
		}
	}
	if len(workers) != 1 {
		t.Fatalf("one user's commits ran on %v", workers)
	}

	// One replica stops; the next wave is committed by the other.
	stop["lt-a"]()
	var wave []string
	evs = nil
	for i := range 8 {
		id := fmt.Sprintf("after%d", i)
		wave = append(wave, id)
		evs = append(evs, endedSession(id, fmt.Sprintf("late%d", i))...)
	}
	s.post(t, evs)
	got = wait(wave)
	for _, id := range wave {
		if c := got[id]; !c.out.Success || c.out.Worker != "lt-b" {
			t.Fatalf("after lt-a stopped, %s: worker %q success %v", id, c.out.Worker, c.out.Success)
		}
	}
}
