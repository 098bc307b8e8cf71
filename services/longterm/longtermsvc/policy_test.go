package longtermsvc

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// putTenant stores tenant's configuration and waits until the committer's
// watcher applied it.
func (f *fixture) putTenant(t *testing.T, tenant string, tc events.TenantConfig) {
	t.Helper()
	rev, err := tenantcfg.Put(context.Background(), f.js, tenant, tc)
	if err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 5*time.Second, "the tenant configuration applied", func() bool { return f.c.tenants.Revision() >= rev })
}

func policyOf(self, peer bool, types ...string) *events.MemoryPolicy {
	return &events.MemoryPolicy{Self: events.PolicyTarget{Enabled: self}, Peer: events.PolicyTarget{Enabled: peer}, MemoryTypes: types}
}

// TestPolicySessionThenTenantThenDefault: a commit runs under the
// session's policy, else its tenant's default, else self memory on and
// peer memory off; a policy naming a type the tenant's registry does not
// have is refused (errPolicy), and a tenant's custom type is known.
func TestPolicySessionThenTenantThenDefault(t *testing.T) {
	f := newFixture(t, Config{})
	tenantDefault := policyOf(false, true, "profile")
	f.putTenant(t, "globex", events.TenantConfig{MemoryPolicy: tenantDefault})
	f.putTenant(t, "initech", events.TenantConfig{CustomMemoryTypes: []events.CustomMemoryType{{Name: "recipes", Prompt: "Recipes."}}})
	for _, tc := range []struct {
		name, tenant string
		session      *events.MemoryPolicy
		want         events.MemoryPolicy
		err          error
	}{
		{"built-in default", "acme", nil, memory.DefaultMemoryPolicy(), nil},
		{"tenant's default", "globex", nil, *tenantDefault, nil},
		{"session's over the tenant's", "globex", policyOf(true, false, "preferences"), *policyOf(true, false, "preferences"), nil},
		{"unknown type", "acme", policyOf(true, false, "recipes"), events.MemoryPolicy{}, errPolicy},
		{"tenant's custom type", "initech", policyOf(true, false, "recipes"), *policyOf(true, false, "recipes"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reg, err := f.c.policy(tc.tenant, &events.SessionStarted{UserID: "u1", MemoryPolicy: tc.session})
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if tc.err != nil {
				return
			}
			if !reflect.DeepEqual(got, tc.want) || reg == nil {
				t.Fatalf("policy %+v, want %+v", got, tc.want)
			}
			for _, name := range got.MemoryTypes {
				if _, ok := reg.Get(name); !ok {
					t.Fatalf("registry of %s lacks %s", tc.tenant, name)
				}
			}
		})
	}
}

// routingPlan is what the model writes in every routing case: a self
// preference, a profile of peer bob, one of an unsafe peer id, a pattern
// by the ranges of bob's and carol's messages, and a self event.
func routingPlan(llm.Request) []llm.ToolCall {
	return []llm.ToolCall{
		write("w1", "preferences", "- Prefers tabs.", ""),
		write("w2", "profile", "- Bob works on payments.", "bob"),
		write("w3", "profile", "- Eve.", "../eve"),
		write("w4", "patterns", "- Reviews on Fridays.", "", [2]int{1, 2}),
		write("w5", "events", "- Chose Postgres.", ""),
	}
}

// TestCommitRoutesWritesByPolicy: under each policy the same model calls
// write exactly the documents the policy permits — self or the batch's
// peers, the allowed types — and record why the others were skipped or
// denied; a policy with nothing to write calls no model. The model is told
// what it may write.
func TestCommitRoutesWritesByPolicy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   *events.MemoryPolicy
		docs     []string
		skipped  map[string]int // reason → count
		denied   int
		writable string // in the system prompt
	}{
		{"default: self only", nil, []string{"self/events", "self/preferences"},
			map[string]int{memory.SkipPeerNotAllowed: 1, memory.SkipUnsafePeer: 1, memory.SkipNoTarget: 1}, 0, "self/profile"},
		{"peers only", policyOf(false, true), []string{"peer/bob/patterns", "peer/bob/profile", "peer/carol/patterns"},
			map[string]int{memory.SkipSelfDisabled: 2, memory.SkipUnsafePeer: 1}, 0, "peer/carol/profile"},
		{"both, profiles only", policyOf(true, true, "profile"), []string{"peer/bob/profile"},
			map[string]int{memory.SkipUnsafePeer: 1}, 3, "self/profile, peer/bob/profile, peer/carol/profile"},
		{"neither", policyOf(false, false), nil, map[string]int{}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{})
			f.model.setPlan(routingPlan)
			f.start(t, "u1", tc.policy)
			f.say(t, "", "I prefer tabs. We chose Postgres.")
			f.say(t, "bob", "I am Bob, I work on payments. I review on Fridays.")
			f.say(t, "carol", "Same here, Fridays.")
			last := f.end(t)
			out, err := f.c.commit(context.Background(), commitJob{tenant: "acme", session: "s1", reason: events.CommitReasonSessionEnded})
			if err != nil || !out.Success || out.ToSeq != last {
				t.Fatalf("commit: %+v, %v", out, err)
			}
			if got := slices.Sorted(maps.Keys(f.docs(t, "acme", "u1"))); !slices.Equal(got, tc.docs) {
				t.Errorf("documents %v, want %v", got, tc.docs)
			}
			skipped := map[string]int{}
			for _, s := range out.Skipped {
				skipped[s.Reason] += s.Count
			}
			if !maps.Equal(skipped, tc.skipped) || len(out.Denied) != tc.denied {
				t.Errorf("skipped %v, denied %q; want %v and %d denied", skipped, out.Denied, tc.skipped, tc.denied)
			}
			checkPrompt(t, f.model.requests(), tc.writable)
			if rec := f.record(t); rec.LastSeq != last || rec.User != "u1" {
				t.Errorf("commit record %+v, want up to %d", rec, last)
			}
		})
	}
}

// checkPrompt checks the first model call was told writable (no call when
// writable is empty).
func checkPrompt(t *testing.T, reqs []llm.Request, writable string) {
	t.Helper()
	if writable == "" {
		if len(reqs) != 0 {
			t.Errorf("%d model calls with nothing writable", len(reqs))
		}
		return
	}
	if len(reqs) == 0 || !strings.Contains(reqs[0].System, writable) {
		t.Errorf("the model was not told it may write %s:\n%s", writable, firstSystem(reqs))
	}
}

func firstSystem(reqs []llm.Request) string {
	if len(reqs) == 0 {
		return "(no call)"
	}
	return reqs[0].System
}

// TestPeersComeFromTheBatch: only the peers of the batch part being
// committed may be written, and never the user under a peer id.
func TestPeersComeFromTheBatch(t *testing.T) {
	f := newFixture(t, Config{})
	f.model.setPlan(func(llm.Request) []llm.ToolCall {
		return []llm.ToolCall{
			write("w1", "profile", "- Dave.", "dave"), // not in the batch
			write("w2", "profile", "- Me.", "u1"),     // the user as a peer
			write("w3", "profile", "- Bob.", "bob"),
		}
	})
	f.start(t, "u1", policyOf(false, true))
	f.say(t, "bob", "Hi, Bob here.")
	f.say(t, "u1", "And me, under my own id.")
	f.end(t)
	out, err := f.c.commit(context.Background(), commitJob{tenant: "acme", session: "s1", reason: events.CommitReasonExplicit})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(out.AllowedPeers); got != "[bob]" {
		t.Fatalf("allowed peers %s, want [bob]", got)
	}
	if got := slices.Sorted(maps.Keys(f.docs(t, "acme", "u1"))); !slices.Equal(got, []string{"peer/bob/profile"}) {
		t.Fatalf("documents %v, want only bob's profile", got)
	}
	res := f.model.results()
	if !strings.Contains(res["w1"].text, memory.SkipPeerNotAllowed) || !strings.Contains(res["w2"].text, memory.SkipUnsafePeer) {
		t.Fatalf("the model was told %+v", res)
	}
}

// TestExecutionPhaseNeedsSelfAndToolWork: execution extraction (self-only
// types, session skills) runs after the long-term phase only when the
// batch has tool work and self memory is on; it writes only self memory
// (no peer is writable in it) and only its own types.
func TestExecutionPhaseNeedsSelfAndToolWork(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy *events.MemoryPolicy
		tools  bool
		phases string
		docs   []string
	}{
		{"tool work", policyOf(true, true), true, "long_term,execution", []string{"peer/bob/profile", "self/preferences", "self/session_skills", "self/trajectories"}},
		{"no tool work", nil, false, "long_term", []string{"self/preferences"}},
		{"self off", policyOf(false, true), true, "long_term", []string{"peer/bob/profile"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{})
			f.model.setPlan(func(req llm.Request) []llm.ToolCall {
				if phaseOf(req) == "long_term" {
					return []llm.ToolCall{write("l1", "preferences", "- Prefers tabs.", ""), write("l2", "profile", "- Bob.", "bob")}
				}
				return []llm.ToolCall{
					write("x1", "trajectories", "- fix go.sum: go test → go mod tidy → go test", ""),
					write("x2", "session_skills", "## tidy\n1. go mod tidy", ""),
					write("x3", "trajectories", "- Bob's run", "bob"),
					write("x4", "preferences", "- Prefers spaces.", ""),
				}
			})
			f.start(t, "u1", tc.policy)
			f.say(t, "bob", "I am Bob.")
			f.say(t, "", "I prefer tabs. Run the tests.")
			if tc.tools {
				f.add(t, f.s.ToolUse(f.id(), "t1", "Bash", `{"command":"go test ./..."}`), f.s.ToolResult(f.id(), "t1", "missing go.sum entry", true))
			}
			out, err := f.c.commit(context.Background(), commitJob{tenant: "acme", session: "s1", reason: events.CommitReasonSessionEnded})
			if err != nil || strings.Join(out.Phases, ",") != tc.phases {
				t.Fatalf("commit: phases %v, %v; want %s", out.Phases, err, tc.phases)
			}
			if got := slices.Sorted(maps.Keys(f.docs(t, "acme", "u1"))); !slices.Equal(got, tc.docs) {
				t.Fatalf("documents %v, want %v", got, tc.docs)
			}
			if res := f.model.results(); tc.phases == "long_term,execution" && (!res["x4"].isError || !strings.Contains(res["x3"].text, memory.SkipPeerNotAllowed)) {
				t.Fatalf("execution phase: another phase's type %+v, a peer %+v", res["x4"], res["x3"])
			}
		})
	}
}
