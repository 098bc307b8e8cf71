package longtermsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/eval"
	"github.com/recallhq/recall/internal/eval/sessiongen"
	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// hygieneUsers are the users of the hygiene measure: each works through
// sessions of one family written blind to the memory rules measured here
// (sessiongen's blind2 and blind3), one seed a user.
var hygieneUsers = []struct {
	user, family string
	seed         uint64
}{{"u-ada", sessiongen.FamilyBlind3, 101}, {"u-bo", sessiongen.FamilyBlind2, 102}, {"u-cy", sessiongen.FamilyBlind3, 103}}

// hygieneUser is what the measure knows of one user's sessions so far.
type hygieneUser struct {
	corpus     map[string]bool     // every word of every message
	current    map[string][]string // a preference's question → its latest answer
	superseded map[string]string   // answers a later session replaced → their question
}

// TestLongTermMemoryHygiene runs sessions of three users through
// long-term memory — the committer on an embedded server, the offline
// provider — and checks, per memory type, that no entry says what no
// message said, that at most 2 % of the entries are duplicates, and logs
// the preferences a later session replaced that are still stated.
// RECALL_LTM_MEASURE=N runs N sessions a user (default 12) and logs the
// figures and the memory context's size after 10, 50 and 200 sessions.
func TestLongTermMemoryHygiene(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("RECALL_LTM_MEASURE"))
	measure := n > 0
	if n <= 0 {
		n = 12
	}
	f := newFixture(t, Config{})
	f.c.provider = llm.NewOffline()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	users := map[string]*hygieneUser{}
	start := time.Now()
	for i := 0; i < n; i++ {
		for _, u := range hygieneUsers {
			h := users[u.user]
			if h == nil {
				h = &hygieneUser{corpus: map[string]bool{}, current: map[string][]string{}, superseded: map[string]string{}}
				users[u.user] = h
			}
			s := sessiongen.Generate(sessiongen.Spec{Seed: u.seed, Index: i, Tokens: 14000, Family: u.family})
			h.learn(s)
			f.commitSession(ctx, t, u.user, fmt.Sprintf("%s-%d", u.user, i), s, h)
		}
		if k := i + 1; k == n || (measure && (k == 10 || k == 50 || k == 200)) {
			for _, u := range hygieneUsers {
				f.checkHygiene(ctx, t, u.user, users[u.user], k, measure)
			}
		}
	}
	t.Logf("%d sessions for %d users in %s", n*len(hygieneUsers), len(hygieneUsers), time.Since(start).Round(time.Second))
}

// learn records a session's facts: a preference answered again with
// another value supersedes the earlier answer, and a knowledge update's
// superseded answers are superseded.
func (h *hygieneUser) learn(s *sessiongen.Session) {
	for _, fa := range s.Facts {
		switch {
		case fa.Category == sessiongen.CatKnowledgeUpdate:
			for _, v := range fa.Superseded {
				h.superseded[v] = fa.Question
			}
		case fa.Kind == "preference" && fa.Question != manyValued:
			for _, old := range h.current[fa.Question] {
				if !containsFold(fa.Expect, old) && distinctive(old) {
					h.superseded[old] = fa.Question
				}
			}
			h.current[fa.Question] = fa.Expect
		}
	}
	for _, vs := range h.current {
		for _, v := range vs {
			delete(h.superseded, v) // said again later: current
		}
	}
}

// manyValued is the one preference question of the families whose
// answers add up instead of replacing each other: every generated file is
// never to be edited by hand.
const manyValued = "Which file must never be edited by hand?"

// distinctive reports whether a value is more than a word (a path, a
// handle, a prefix, a number): a bare word such as a branch prefix also
// occurs inside other values (internal/gen/heron.pb.go), so it cannot be
// told stated or not.
func distinctive(v string) bool { return strings.ContainsAny(v, "/@_.0123456789") }

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// commitSession stores the session's records for user (its own
// session.started first) and commits them as a session end would.
func (f *fixture) commitSession(ctx context.Context, t *testing.T, user, id string, s *sessiongen.Session, h *hygieneUser) {
	t.Helper()
	res, err := importer.ClaudeCode(bytes.NewReader(s.JSONL), importer.Options{Tenant: "acme", Session: id})
	if err != nil {
		t.Fatal(err)
	}
	sess := eventtest.NewSession("acme", id)
	evs := []event.Event{sess.Started("start", events.SessionStarted{UserID: user})}
	for _, e := range res.Events {
		if e.Type() != events.TypeMessage {
			continue
		}
		var m events.Message
		if err := e.DataAs(&m); err != nil {
			t.Fatal(err)
		}
		addContent(h.corpus, m.Content)
		e.SetExtension(events.ExtTenant, "acme")
		evs = append(evs, e)
	}
	eventtest.Publish(ctx, t, f.js, f.c.reader.Layout(), evs...)
	if _, err := f.c.commit(ctx, commitJob{tenant: "acme", session: id, reason: "ended"}); err != nil {
		t.Fatalf("committing %s: %v", id, err)
	}
}

// checkHygiene scores user's memory after k sessions.
func (f *fixture) checkHygiene(ctx context.Context, t *testing.T, user string, h *hygieneUser, k int, measure bool) {
	t.Helper()
	list, err := listDocs(ctx, f.c.ltm, "acme", user)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, d := range list {
		docs[d.Target+"/"+d.Type] = d.Content
	}
	var superseded []string
	for v := range h.superseded {
		superseded = append(superseded, v)
	}
	types, stated := eval.Hygiene(docs, h.corpus, superseded)
	tokens := memory.EstimateText(contextBlock(user, list))
	for _, ty := range types {
		t.Logf("%s after %d sessions: %s entries %d ungrounded %d duplicates %d (%.1f %%) %q", user, k, ty.Type, ty.Entries, ty.Ungrounded, ty.Duplicates,
			100*float64(ty.Duplicates)/float64(max(ty.Entries, 1)), ty.Examples)
		if !measure && (ty.Ungrounded > 0 || ty.Duplicates*50 > ty.Entries) {
			t.Errorf("%s after %d sessions: %s has %d ungrounded and %d duplicate entries of %d: %q", user, k, ty.Type, ty.Ungrounded, ty.Duplicates, ty.Entries, ty.Examples)
		}
	}
	// A stale value is a supersede failure when the memory holds its
	// replacement; else the replacement was never extracted.
	replaced := 0
	for _, v := range stated {
		if cur := h.current[h.superseded[v]]; len(cur) > 0 {
			if _, held := eval.Hygiene(docs, h.corpus, cur); len(held) == len(cur) {
				replaced++
			}
		}
	}
	t.Logf("%s after %d sessions: context %d tokens; of %d superseded values %d still stated, %d of them beside their replacement %q",
		user, k, tokens, len(superseded), len(stated), replaced, stated)
	// Not asserted: a preference said again in other words ("I prefer X_
	// in front of any env var", later "every new env var should start
	// with Y_") is not recognized as the same, so 0–1 a user remain
	// (docs/eval.md#long-term-memory-hygiene).
}

// addContent adds the words of every block of c — text, thinking, tool
// names, the string values of tool inputs, tool results — to corpus.
func addContent(corpus map[string]bool, c events.Content) {
	for i := range c {
		b := &c[i]
		eval.AddCorpus(corpus, b.Text+" "+b.Thinking+" "+b.Name)
		if len(b.Input) > 0 {
			var v any
			_ = json.Unmarshal(b.Input, &v)
			addStrings(corpus, v)
		}
		addContent(corpus, b.Content)
	}
}

func addStrings(corpus map[string]bool, v any) {
	switch v := v.(type) {
	case string:
		eval.AddCorpus(corpus, v)
	case map[string]any:
		for _, x := range v {
			addStrings(corpus, x)
		}
	case []any:
		for _, x := range v {
			addStrings(corpus, x)
		}
	}
}
