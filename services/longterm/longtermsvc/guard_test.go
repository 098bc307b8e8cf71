package longtermsvc

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// seed stores a memory document under key and returns its revision.
func (f *fixture) seed(t *testing.T, key, content string) uint64 {
	t.Helper()
	b, _ := json.Marshal(events.StoredMemoryDocument{Content: content, UpdatedAt: time.Now().UTC()})
	rev, err := f.c.ltm.Put(context.Background(), key, b)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// hostilePlan is a forked model that tries to leave its user's space
// (another user's and another tenant's documents, a peer not in the batch,
// a type of another phase, a tool it was not given), and writes one
// permitted document.
func hostilePlan(llm.Request) []llm.ToolCall {
	edit := func(id, path string) llm.ToolCall {
		return call(id, "memory_edit", map[string]string{"path": path, "old_string": "secret", "new_string": "PWNED"})
	}
	return []llm.ToolCall{
		edit("e-user", "../u2/self/profile"),
		edit("e-tenant", "../../globex/u1/self/profile"),
		edit("e-peer", "peer/mallory/profile"),
		edit("e-phase", "self/trajectories"),
		write("w-phase", "trajectories", "- ran rm -rf", ""),
		write("w-type", "passwords", "- hunter2", ""),
		call("r-user", "memory_read", map[string]string{"path": "../u2/self/profile"}),
		call("bash", "Bash", map[string]string{"command": "env"}),
		write("w-range", "profile", "- someone", "", [2]int{0, 9}),
		write("w-ok", "preferences", "- Prefers tabs.", ""),
	}
}

// TestForkedModelConfinedToItsSpace: a model that tries to write or read
// outside the user's permitted memory space is refused on every call —
// each refusal goes back to it as an error naming what is writable and is
// recorded in the outcome — while its permitted write lands and the commit
// succeeds. Other users' and tenants' documents are untouched.
func TestForkedModelConfinedToItsSpace(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	otherUser := f.seed(t, events.LTMKey("acme", "u2", "", "profile"), "- u2's secret")
	otherTenant := f.seed(t, events.LTMKey("globex", "u1", "", "profile"), "- globex's secret")
	f.model.setPlan(hostilePlan)
	f.start(t, "u1", policyOf(true, true))
	f.say(t, "", "I prefer tabs.")
	f.say(t, "bob", "Hi.")
	f.end(t)
	out, err := f.c.commit(ctx, commitJob{tenant: "acme", session: "s1", reason: events.CommitReasonSessionEnded})
	if err != nil || !out.Success {
		t.Fatalf("commit: %+v, %v", out, err)
	}
	if got := slices.Sorted(maps.Keys(f.docs(t, "acme", "u1"))); !slices.Equal(got, []string{"self/preferences"}) {
		t.Fatalf("documents %v, want only the permitted self/preferences", got)
	}
	for key, rev := range map[string]uint64{events.LTMKey("acme", "u2", "", "profile"): otherUser, events.LTMKey("globex", "u1", "", "profile"): otherTenant} {
		if e, err := f.c.ltm.Get(ctx, key); err != nil || e.Revision() != rev || strings.Contains(string(e.Value()), "PWNED") {
			t.Fatalf("%s changed: %v", key, err)
		}
	}
	res := f.model.results()
	for _, id := range []string{"e-user", "e-tenant", "e-peer", "e-phase", "w-phase", "w-type", "r-user", "bash"} {
		if r := res[id]; !r.isError || strings.Contains(r.text, "secret") {
			t.Errorf("call %s answered %+v, want an error that reveals nothing", id, r)
		}
	}
	if r := res["e-peer"]; !strings.Contains(r.text, "only self/profile") || !strings.Contains(r.text, "peer/bob/profile") {
		t.Errorf("a refused edit does not say what is writable: %q", r.text)
	}
	if r := res["w-ok"]; r.isError || !strings.Contains(r.text, "written to self/preferences") {
		t.Errorf("the permitted write answered %+v", r)
	}
	if len(out.Denied) != 7 || !strings.HasPrefix(out.Denied[6], "Bash: ") {
		t.Errorf("denied %q, want the 7 refused writes and tools", out.Denied)
	}
	if len(out.Skipped) != 1 || out.Skipped[0].Reason != memory.SkipBadRange {
		t.Errorf("skipped %+v, want the out-of-batch range", out.Skipped)
	}
}

// TestCommitDoesNotOverwriteAConcurrentWrite: documents are written with
// compare-and-set: when another writer changed a document while the model
// worked, the commit fails (announced, the batch left for the next
// attempt) instead of overwriting it; the next attempt merges into it.
func TestCommitDoesNotOverwriteAConcurrentWrite(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	a := f.watch(t)
	key := events.LTMKey("acme", "u1", "", "preferences")
	f.model.setPlan(func(llm.Request) []llm.ToolCall {
		return []llm.ToolCall{write("w1", "preferences", "- Prefers tabs.", "")}
	})
	f.model.onResults = func(llm.Request) { f.seed(t, key, "- Prefers dark mode.\n") }
	f.start(t, "u1", nil)
	f.say(t, "", "I prefer tabs.")
	last := f.end(t)
	out, err := f.c.commit(ctx, commitJob{tenant: "acme", session: "s1", reason: events.CommitReasonSessionEnded})
	if !errors.Is(err, errFailed) || !errors.Is(err, jetstream.ErrKeyExists) || out == nil || out.Success {
		t.Fatalf("commit over a concurrent write: %+v, %v; want errFailed (key exists)", out, err)
	}
	if doc := f.docs(t, "acme", "u1")["self/preferences"]; doc != "- Prefers dark mode.\n" {
		t.Fatalf("the concurrent write was overwritten: %q", doc)
	}
	if rec := f.record(t); rec.LastSeq != 0 {
		t.Fatalf("commit record advanced to %d over a failed commit", rec.LastSeq)
	}
	f.model.onResults = nil
	if out, err = f.c.commit(ctx, commitJob{tenant: "acme", session: "s1", reason: events.CommitReasonSessionEnded}); err != nil || out.ToSeq != last {
		t.Fatalf("the next attempt: %+v, %v", out, err)
	}
	if doc := f.docs(t, "acme", "u1")["self/preferences"]; !strings.Contains(doc, "dark mode") || !strings.Contains(doc, "tabs") {
		t.Fatalf("the next attempt did not merge: %q", doc)
	}
	waitAnnounced(t, a, 2)
	if got := a.list(); got[0].Success || got[0].Error == "" || !got[1].Success {
		t.Fatalf("announced %+v, want the failure then the success", got)
	}
}

// waitAnnounced waits for n memory.committed notifications.
func waitAnnounced(t *testing.T, a *announcements, n int) {
	t.Helper()
	testpoll.Until(t, 5*time.Second, "the commits' notifications", func() bool { return len(a.list()) >= n })
}
