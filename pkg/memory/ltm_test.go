package memory

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

func peerMsg(peer, text string) *events.Message {
	return &events.Message{Role: events.RoleUser, PeerID: peer, Content: events.Content{{Type: events.BlockText, Text: text}}}
}

// TestRouteTable covers every routing row of the seed's isolation handler,
// for self on and off.
func TestRouteTable(t *testing.T) {
	reg, _ := NewRegistry(nil)
	prefs, _ := reg.Get("preferences")
	traj, _ := reg.Get("trajectories")
	batch := []*events.Message{
		peerMsg("", "mine"),            // 0: no peer → self
		peerMsg("bob", "from bob"),     // 1: allowed peer
		peerMsg("eve", "from eve"),     // 2: safe, not allowed
		peerMsg("u1", "from the user"), // 3: the user's own id → self
	}
	allowed := []string{"bob"}
	for _, c := range []struct {
		name      string
		op        MemoryOp
		typ       MemoryType
		allowSelf bool
		want      string // targets joined, or the skip reason
	}{
		{"no peer, no ranges, self on", MemoryOp{}, prefs, true, "self"},
		{"no peer, no ranges, self off", MemoryOp{}, prefs, false, SkipSelfDisabled},
		{"allowed peer", MemoryOp{PeerID: "bob"}, prefs, true, "peer/bob"},
		{"allowed peer, self off", MemoryOp{PeerID: "bob"}, prefs, false, "peer/bob"},
		{"unsafe peer (bad id)", MemoryOp{PeerID: "../alice"}, prefs, true, SkipUnsafePeer},
		{"unsafe peer (the user)", MemoryOp{PeerID: "u1"}, prefs, true, SkipUnsafePeer},
		{"safe peer not allowed", MemoryOp{PeerID: "eve"}, prefs, true, SkipPeerNotAllowed},
		{"self-only type to a peer", MemoryOp{PeerID: "bob"}, traj, true, SkipSelfOnlyType},
		{"ranges: self and allowed peer", MemoryOp{Ranges: []Range{{0, 2}}}, prefs, true, "self,peer/bob"},
		{"ranges: the user's own id is self", MemoryOp{Ranges: []Range{{3, 3}}}, prefs, true, "self"},
		{"ranges, self off: the peer only", MemoryOp{Ranges: []Range{{0, 1}}}, prefs, false, "peer/bob"},
		{"ranges: only disabled targets", MemoryOp{Ranges: []Range{{0, 0}, {2, 2}}}, prefs, false, SkipNoTarget},
		{"ranges: unallowed peer only", MemoryOp{Ranges: []Range{{2, 2}}}, prefs, true, SkipNoTarget},
		{"ranges: self-only type keeps self", MemoryOp{Ranges: []Range{{0, 1}}}, traj, true, "self"},
		{"ranges out of the batch", MemoryOp{Ranges: []Range{{2, 9}}}, prefs, true, SkipBadRange},
	} {
		got, why := Route(c.op, c.typ, c.allowSelf, "u1", allowed, batch)
		s := why
		if why == "" {
			var names []string
			for _, tg := range got {
				names = append(names, tg.String())
			}
			s = strings.Join(names, ",")
		}
		if s != c.want {
			t.Errorf("%s: %s, want %s", c.name, s, c.want)
		}
	}
}

func TestPolicyAndPhases(t *testing.T) {
	reg, err := NewRegistry([]events.CustomMemoryType{{Name: "recipes", Prompt: "Recipes they like."}, {Name: "secrets", Prompt: "x", AgentOnly: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.CheckPolicy(&events.MemoryPolicy{MemoryTypes: []string{"profile", "nope"}}); !errors.Is(err, ErrUnknownMemoryType) || !strings.Contains(err.Error(), "recipes") || !strings.Contains(err.Error(), "trajectories") {
		t.Fatalf("unknown type: %v", err)
	}
	names := func(ts []MemoryType) string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return strings.Join(out, ",")
	}
	on, off := events.PolicyTarget{Enabled: true}, events.PolicyTarget{}
	for _, c := range []struct {
		p                  events.MemoryPolicy
		peers              []string
		long, exec, skills string
	}{
		{events.MemoryPolicy{Self: on}, nil, "profile,preferences,entities,events,cases,patterns,recipes,secrets", "trajectories,experiences", "true"},
		{events.MemoryPolicy{Self: off, Peer: on}, []string{"bob"}, "profile,preferences,entities,events,cases,patterns,recipes", "", "false"},
		{events.MemoryPolicy{Self: off, Peer: on}, nil, "", "", "false"},
		{events.MemoryPolicy{Self: off, Peer: off}, []string{"bob"}, "", "", "false"},
		{events.MemoryPolicy{Self: on, MemoryTypes: []string{"preferences", "session_skills"}}, nil, "preferences", "", "false"},
		{events.MemoryPolicy{Self: on, MemoryTypes: []string{"experiences", "session_skills"}}, nil, "", "experiences", "true"},
		{events.MemoryPolicy{Self: on, MemoryTypes: []string{}}, nil, "", "", "false"},
	} {
		ph := reg.PlanPhases(c.p, c.peers)
		if got := fmt.Sprintf("%s|%s|%v", names(ph.LongTerm), names(ph.Execution), ph.SessionSkills); got != c.long+"|"+c.exec+"|"+c.skills {
			t.Errorf("%+v peers %v: %s", c.p, c.peers, got)
		}
	}
	if _, err := NewRegistry([]events.CustomMemoryType{{Name: "profile", Prompt: "x"}}); err == nil {
		t.Error("a custom type may not shadow a built-in")
	}
}

func TestAllowedPeers(t *testing.T) {
	batch := []*events.Message{peerMsg("bob", ""), peerMsg("a.b", ""), peerMsg("u1", ""), peerMsg("carol", ""), peerMsg("bob", "")}
	if got := AllowedPeers(events.MemoryPolicy{Peer: events.PolicyTarget{Enabled: true}}, "u1", batch); strings.Join(got, ",") != "bob,carol" {
		t.Fatalf("allowed peers: %v", got)
	}
	if got := AllowedPeers(events.MemoryPolicy{}, "u1", batch); got != nil {
		t.Fatalf("peer memory off: %v", got)
	}
}

// TestCheckMemoryPath: writes go only to the permitted targets and types;
// everything else is denied with the list of what is allowed.
func TestCheckMemoryPath(t *testing.T) {
	reg, _ := NewRegistry(nil)
	ph := reg.PlanPhases(events.MemoryPolicy{Self: events.PolicyTarget{Enabled: true}, Peer: events.PolicyTarget{Enabled: true}}, []string{"bob"})
	if tg, typ, err := CheckMemoryPath("peer/bob/preferences", reg, ph.LongTerm, true, []string{"bob"}); err != nil || tg.Peer != "bob" || typ != "preferences" {
		t.Fatalf("allowed peer path: %v %v %v", tg, typ, err)
	}
	if _, _, err := CheckMemoryPath("self/profile", reg, ph.LongTerm, true, []string{"bob"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		"self/../other-user/profile", "../u2/self/profile", "/etc/passwd", "peer/eve/profile", "self/trajectories",
		"self/profile/../../x", "peer/bob", "self", "acme.u2.self.profile", "self/unknown", "peer/bob/../../self/profile",
	} {
		_, _, err := CheckMemoryPath(bad, reg, ph.LongTerm, true, []string{"bob"})
		if !errors.Is(err, ErrPathDenied) || !strings.Contains(err.Error(), "only self/profile") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, _, err := CheckMemoryPath("self/profile", reg, ph.LongTerm, false, []string{"bob"}); !errors.Is(err, ErrPathDenied) {
		t.Errorf("self disabled: %v", err)
	}
}

func TestMergeMemory(t *testing.T) {
	doc, n := MergeMemory("- Prefers Go\n", "- prefers go\n- Uses vim\n\n- Uses  VIM")
	if doc != "- Prefers Go\n- Uses vim\n" || n != 1 {
		t.Fatalf("%q %d", doc, n)
	}
}

func TestOfflineMemoryOps(t *testing.T) {
	batch := []*events.Message{
		peerMsg("", "I prefer tabs over spaces. Fix the build."),
		peerMsg("bob", "My name is Bob and I work on payments. We decided to use Postgres."),
		{Role: events.RoleAssistant, Content: events.Content{{Type: events.BlockToolUse, ID: "t1", Name: "Bash", Input: []byte(`{}`)}}},
		{Role: events.RoleUser, Content: events.Content{{Type: events.BlockToolResult, ToolUseID: "t1", IsError: true, Content: events.Content{{Type: events.BlockText, Text: "exit 1: go: cannot find main module"}}}}},
	}
	ops := OfflineMemoryOps(batch, []string{"preferences", "profile", "events", "trajectories", "experiences"})
	var got []string
	for _, op := range ops {
		got = append(got, op.Type+"@"+op.PeerID+":"+op.Content)
	}
	want := []string{
		"preferences@:- I prefer tabs over spaces.",
		"profile@bob:- My name is Bob and I work on payments.",
		"events@bob:- We decided to use Postgres.",
		"trajectories@:- I prefer tabs over spaces.: Bash",
		"experiences@:- Bash failed: exit 1: go: cannot find main module",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ops:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if ops := OfflineMemoryOps(batch, []string{"profile"}); len(ops) != 1 {
		t.Fatalf("types filter: %v", ops)
	}
}

// TestMergeMemoryDedupesAndSupersedes: a line said again nearly the same
// way replaces the older one, a clause said again with another value
// replaces the line that held the old value, whatever the rest of either
// sentence says, and lines about other things stay.
func TestMergeMemoryDedupesAndSupersedes(t *testing.T) {
	doc := "- Nobody has touched the code in months; separately, fixtures belong in testdata/wren, that's the convention.\n" +
		"- Always run make lint before a commit.\n" +
		"- Fix the build: Read → Bash → Edit → Bash\n"
	cases := []struct {
		name, add string
		want      []string // the lines after, in order
		added     int
	}{
		{"superseded value", "- The tests are flaky since the upgrade; separately, fixtures belong in testdata/heron, that's the convention.",
			[]string{"- Always run make lint before a commit.", "- Fix the build: Read → Bash → Edit → Bash", "- The tests are flaky since the upgrade; separately, fixtures belong in testdata/heron, that's the convention."}, 1},
		{"near duplicate trajectory", "- Fix the build: Read → Edit → Bash → Bash",
			[]string{"- Nobody has touched the code in months; separately, fixtures belong in testdata/wren, that's the convention.", "- Always run make lint before a commit.", "- Fix the build: Read → Edit → Bash → Bash"}, 1},
		{"same line", "- always run  make lint before a commit.", strings.Split(strings.TrimSpace(doc), "\n"), 0},
		{"another subject", "- I prefer ROOK_ in front of any environment variable.",
			append(strings.Split(strings.TrimSpace(doc), "\n"), "- I prefer ROOK_ in front of any environment variable."), 1},
		{"two values in a clause are not one setting", "- Nobody has touched the code; separately, fixtures belong in testdata/a or testdata/b, fine.",
			append(strings.Split(strings.TrimSpace(doc), "\n"), "- Nobody has touched the code; separately, fixtures belong in testdata/a or testdata/b, fine."), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, n := MergeMemory(doc, c.add)
			if want := strings.Join(c.want, "\n") + "\n"; got != want || n != c.added {
				t.Fatalf("got %d added:\n%s\nwant %d:\n%s", n, got, c.added, want)
			}
		})
	}
	// A setting changed twice in one content keeps the last.
	got, _ := MergeMemory("", "- Use port 4123 for the preview server.\n- Use port 8123 for the preview server.")
	if got != "- Use port 8123 for the preview server.\n" {
		t.Fatalf("got %q", got)
	}
}
