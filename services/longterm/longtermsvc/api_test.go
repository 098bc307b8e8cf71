package longtermsvc

import (
	"context"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
)

// TestExplicitCommitAnswers: an explicit commit answers its outcome —
// a failed one too (200, success false: the batch waits for the next
// commit) — and refuses with the status that says why: 422 for a session
// without a user or with nothing new, 400 for a refused policy.
func TestExplicitCommitAnswers(t *testing.T) {
	f := newFixture(t, Config{})
	f.model.setPlan(func(llm.Request) []llm.ToolCall {
		return []llm.ToolCall{write("w", "preferences", "- Prefers tabs.", "")}
	})
	f.start(t, "u1", nil)
	last := f.say(t, "", "I prefer tabs.")
	bad := eventtest.NewSession("acme", "s2")
	f.add(t, bad.Started("1", events.SessionStarted{UserID: "u1", MemoryPolicy: policyOf(true, false, "no_such_type")}), bad.User("2", "hi"))
	anon := eventtest.NewSession("acme", "s3")
	f.add(t, anon.User("1", "hi"))
	ctx := context.Background()

	res, aerr := f.c.explicit(ctx, "acme", "s1")
	out, ok := res.(*events.MemoryCommitted)
	if aerr != nil || !ok || !out.Success || out.Reason != events.CommitReasonExplicit || out.ToSeq != last {
		t.Fatalf("explicit commit: %+v, %+v", res, aerr)
	}
	for _, tc := range []struct {
		session string
		code    int
		says    string
	}{
		{"s1", 422, "nothing new"},
		{"s3", 422, "no user_id"},
		{"s2", 400, "no_such_type"},
	} {
		if _, aerr := f.c.explicit(ctx, "acme", tc.session); aerr == nil || aerr.Code != tc.code || !strings.Contains(aerr.Msg, tc.says) {
			t.Errorf("explicit commit of %s: %+v, want %d saying %q", tc.session, aerr, tc.code, tc.says)
		}
	}
	f.say(t, "", "And dark mode.")
	f.model.setFailing(-1)
	res, aerr = f.c.explicit(ctx, "acme", "s1")
	if out, ok := res.(*events.MemoryCommitted); aerr != nil || !ok || out.Success || !strings.Contains(out.Error, "529") {
		t.Fatalf("explicit commit with a failing model: %+v, %+v; want the failed outcome", res, aerr)
	}
}

// TestReadServesTheUsersMemory: a read answers the user's documents, self
// first, filtered by type, with the context block a new session starts
// with; an unknown type is refused (400) and another user's documents are
// never served.
func TestReadServesTheUsersMemory(t *testing.T) {
	f := newFixture(t, Config{})
	f.seed(t, events.LTMKey("acme", "u1", "bob", "profile"), "- Bob works on payments.\n")
	f.seed(t, events.LTMKey("acme", "u1", "", "preferences"), "- Prefers tabs.\n")
	f.seed(t, events.LTMKey("acme", "u1", "", "profile"), "- Ada, SRE.\n")
	f.seed(t, events.LTMKey("acme", "u10", "", "profile"), "- another user.\n")
	ctx := context.Background()
	res, aerr := f.c.read(ctx, "acme", "u1", nil)
	r, ok := res.(events.LTMReply)
	if aerr != nil || !ok || len(r.Documents) != 3 {
		t.Fatalf("read: %+v, %+v", res, aerr)
	}
	var order []string
	for _, d := range r.Documents {
		order = append(order, d.Target+"/"+d.Type)
	}
	if got := strings.Join(order, ","); got != "self/preferences,self/profile,peer/bob/profile" {
		t.Fatalf("documents %s, want self first, then peers, by type", got)
	}
	if !strings.HasPrefix(r.Context, `<long-term-memory user="u1">`) || !strings.Contains(r.Context, "## profile — peer bob") || strings.Contains(r.Context, "another user") {
		t.Fatalf("context block:\n%s", r.Context)
	}
	res, aerr = f.c.read(ctx, "acme", "u1", []byte(`{"types":["profile"]}`))
	if r, ok := res.(events.LTMReply); aerr != nil || !ok || len(r.Documents) != 2 || r.Documents[0].Type != "profile" {
		t.Fatalf("read of profiles: %+v, %+v", res, aerr)
	}
	if _, aerr := f.c.read(ctx, "acme", "u1", []byte(`{"types":["recipes"]}`)); aerr == nil || aerr.Code != 400 {
		t.Fatalf("read of an unknown type: %+v, want 400", aerr)
	}
	if res, aerr := f.c.read(ctx, "acme", "nobody", nil); aerr != nil || len(res.(events.LTMReply).Documents) != 0 {
		t.Fatalf("read of a user without memory: %+v, %+v", res, aerr)
	}
}
