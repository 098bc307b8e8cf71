package memory

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// Long-term memory: what outlives a session, per user (self) and per peer
// (the other agents and users of a conversation), under a memory policy. A
// commit extracts it from a batch of the session's messages with a forked
// model call that may read freely and write only inside the user's memory
// space. See docs/long-term-memory.md.

// Memory type groups.
const (
	// GroupLongTerm types are extracted once over the batch, for self and
	// peers.
	GroupLongTerm = "long_term"
	// GroupExecution types (trajectories, experiences) and session skills
	// are extracted in the execution phase, self only.
	GroupExecution = "execution"
)

// MemoryType is one kind of long-term memory document.
type MemoryType struct {
	Name        string
	Description string
	Group       string
	// SelfOnly types never go to a peer (execution types, session skills,
	// agent_only custom types).
	SelfOnly bool
	// Prompt is the fragment telling the model what to extract.
	Prompt string
	// Shape describes the document ("- bullet per fact", ...).
	Shape string
	// Custom marks a tenant's type.
	Custom bool
}

// SessionSkillsType is the session-skill memory type: reusable procedures
// learned in the session; it runs inside the execution phase only.
const SessionSkillsType = "session_skills"

// BuiltinMemoryTypes is the registry of built-in types, in order.
var BuiltinMemoryTypes = []MemoryType{
	{Name: "profile", Group: GroupLongTerm, Description: "who the person is: name, role, team, expertise, environment",
		Prompt: "Stable facts about who they are (name, role, team, expertise, the environment they work in).", Shape: "- one fact per line"},
	{Name: "preferences", Group: GroupLongTerm, Description: "how they like things done: style, tools, conventions, dislikes",
		Prompt: "Stated preferences and standing instructions (tools, style, conventions, things to always or never do).", Shape: "- one preference per line, in their words"},
	{Name: "entities", Group: GroupLongTerm, Description: "projects, systems, repositories, people and what they are",
		Prompt: "Named projects, systems, repositories, services and people, with what each is.", Shape: "- **name**: what it is"},
	{Name: "events", Group: GroupLongTerm, Description: "decisions and milestones with their dates and reasons",
		Prompt: "Decisions taken and milestones reached, with the reason and date when known.", Shape: "- date — what happened, why"},
	{Name: "cases", Group: GroupLongTerm, Description: "problems met and how they were solved",
		Prompt: "Problems met and how they were solved (symptom, cause, fix).", Shape: "- symptom → cause → fix"},
	{Name: "patterns", Group: GroupLongTerm, Description: "recurring ways of working that held up",
		Prompt: "Recurring ways of working that held up across tasks.", Shape: "- pattern: when it applies"},
	{Name: "trajectories", Group: GroupExecution, SelfOnly: true, Description: "tool-call sequences that completed a task",
		Prompt: "The sequences of tool calls that completed a task, summarized as steps.", Shape: "- task: step → step → step"},
	{Name: "experiences", Group: GroupExecution, SelfOnly: true, Description: "lessons from what the agent tried: what worked, what failed",
		Prompt: "Lessons from what was tried: what worked, what failed and why.", Shape: "- lesson"},
	{Name: SessionSkillsType, Group: GroupExecution, SelfOnly: true, Description: "reusable procedures learned in the session",
		Prompt: "Reusable procedures learned in this session, as named skills with steps.", Shape: "## skill name\n1. step"},
}

// CustomType is a tenant's memory type (events.CustomMemoryType) as a
// registry entry.
func CustomType(c events.CustomMemoryType) MemoryType {
	return MemoryType{Name: c.Name, Description: c.Description, Group: GroupLongTerm, SelfOnly: c.AgentOnly,
		Prompt: c.Prompt, Shape: orString(c.Schema, "- one item per line"), Custom: true}
}

func orString(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// Registry is the memory types of a tenant: the built-ins and its custom
// types.
type Registry struct {
	types  []MemoryType
	byName map[string]MemoryType
}

// ErrUnknownMemoryType is wrapped by errors naming a type not in a registry.
var ErrUnknownMemoryType = errors.New("unknown memory type")

// NewRegistry returns the built-in types plus custom ones; a custom type
// must have a valid id-like name that is not taken, and a prompt.
func NewRegistry(custom []events.CustomMemoryType) (*Registry, error) {
	r := &Registry{byName: map[string]MemoryType{}}
	for _, t := range BuiltinMemoryTypes {
		r.add(t)
	}
	for _, c := range custom {
		if err := events.ValidateID(c.Name); err != nil {
			return nil, fmt.Errorf("custom memory type %q: %w", c.Name, err)
		}
		if _, taken := r.byName[c.Name]; taken {
			return nil, fmt.Errorf("custom memory type %q: the name is taken", c.Name)
		}
		if strings.TrimSpace(c.Prompt) == "" {
			return nil, fmt.Errorf("custom memory type %q: a prompt is required", c.Name)
		}
		r.add(CustomType(c))
	}
	return r, nil
}

func (r *Registry) add(t MemoryType) {
	r.types = append(r.types, t)
	r.byName[t.Name] = t
}

// Types returns the registry's types in order.
func (r *Registry) Types() []MemoryType { return r.types }

// Get returns a type by name.
func (r *Registry) Get(name string) (MemoryType, bool) {
	t, ok := r.byName[name]
	return t, ok
}

// Names lists the registry's type names.
func (r *Registry) Names() []string {
	out := make([]string, len(r.types))
	for i, t := range r.types {
		out[i] = t.Name
	}
	return out
}

// CheckPolicy rejects a policy naming a type the registry does not have,
// listing the registry.
func (r *Registry) CheckPolicy(p *events.MemoryPolicy) error {
	if p == nil {
		return nil
	}
	for _, t := range p.MemoryTypes {
		if _, ok := r.byName[t]; !ok {
			return fmt.Errorf("%w %q (known: %s)", ErrUnknownMemoryType, t, strings.Join(r.Names(), ", "))
		}
	}
	return nil
}

// DefaultMemoryPolicy is self memory on, peer memory off, every type.
func DefaultMemoryPolicy() events.MemoryPolicy {
	return events.MemoryPolicy{Self: events.PolicyTarget{Enabled: true}}
}

// Allowed reports whether the policy allows type name (memory_types nil
// allows every type).
func Allowed(p events.MemoryPolicy, name string) bool {
	if p.MemoryTypes == nil {
		return true
	}
	for _, t := range p.MemoryTypes {
		if t == name {
			return true
		}
	}
	return false
}

// Phases says which extraction phases a commit runs and with which types.
type Phases struct {
	// LongTerm are the long-term types to extract (empty: the phase does
	// not run); AllowSelf says whether self memory may be written.
	LongTerm  []MemoryType
	AllowSelf bool
	// Execution are the execution types (self only; empty when self memory
	// is off or none is allowed); SessionSkills says whether session skills
	// run inside that phase.
	Execution     []MemoryType
	SessionSkills bool
}

// PlanPhases applies a policy to the registry: long-term extraction runs
// when self is enabled or there are allowed peers, with the allowed types
// (self-only ones only when self is enabled); execution extraction runs
// only with self enabled; session skills only inside it.
func (r *Registry) PlanPhases(p events.MemoryPolicy, allowedPeers []string) Phases {
	ph := Phases{AllowSelf: p.Self.Enabled}
	peers := p.Peer.Enabled && len(allowedPeers) > 0
	for _, t := range r.types {
		if !Allowed(p, t.Name) {
			continue
		}
		switch t.Group {
		case GroupLongTerm:
			if ph.AllowSelf || (peers && !t.SelfOnly) {
				ph.LongTerm = append(ph.LongTerm, t)
			}
		case GroupExecution:
			if !ph.AllowSelf {
				continue
			}
			if t.Name == SessionSkillsType {
				ph.SessionSkills = true
				continue
			}
			ph.Execution = append(ph.Execution, t)
		}
	}
	if len(ph.Execution) == 0 {
		ph.SessionSkills = false // skills only run inside an execution phase with work
	}
	return ph
}

// SafePeerID reports whether id may name a peer of user: a valid id that is
// not the user.
func SafePeerID(id, user string) bool {
	return id != "" && id != user && events.ValidateID(id) == nil
}

// AllowedPeers collects the safe peer ids of a batch, in order of first
// appearance, when peer memory is enabled.
func AllowedPeers(p events.MemoryPolicy, user string, batch []*events.Message) []string {
	if !p.Peer.Enabled {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, m := range batch {
		if SafePeerID(m.PeerID, user) && !seen[m.PeerID] {
			seen[m.PeerID] = true
			out = append(out, m.PeerID)
		}
	}
	return out
}

// Target is where a memory document lives: self, or a peer.
type Target struct {
	Peer string // "" = self
}

func (t Target) String() string {
	if t.Peer == "" {
		return "self"
	}
	return "peer/" + t.Peer
}

// Range is an inclusive range of batch message indexes (0-based).
type Range struct{ From, To int }

// MemoryOp is one extracted write: content for a type, with an optional
// peer or message ranges deciding its targets.
type MemoryOp struct {
	Type    string
	Content string
	PeerID  string
	Ranges  []Range
}

// Skip reasons of routed operations.
const (
	SkipSelfDisabled   = "self_disabled"
	SkipUnsafePeer     = "unsafe_peer"
	SkipPeerNotAllowed = "peer_not_allowed"
	SkipSelfOnlyType   = "self_only_type"
	SkipTypeNotAllowed = "type_not_allowed"
	SkipBadRange       = "bad_range"
	SkipNoTarget       = "only_disabled_targets"
)

// Route decides the targets of one operation (the seed's isolation
// handler): no peer and no ranges → self when enabled; a safe allowed peer
// → that peer; an unsafe or unallowed peer → skipped; ranges → the
// messages of the ranges decide (no peer → self, an allowed peer → that
// peer); only disabled targets → skipped. Self-only types never go to a
// peer. Roles are never rewritten: routing only picks targets. It returns
// the targets, or the reason it wrote nothing.
func Route(op MemoryOp, t MemoryType, allowSelf bool, user string, allowedPeers []string, batch []*events.Message) ([]Target, string) {
	allowed := func(p string) bool {
		for _, a := range allowedPeers {
			if a == p {
				return true
			}
		}
		return false
	}
	peerTarget := func(p string) (Target, string) {
		switch {
		case !SafePeerID(p, user):
			return Target{}, SkipUnsafePeer
		case !allowed(p):
			return Target{}, SkipPeerNotAllowed
		case t.SelfOnly:
			return Target{}, SkipSelfOnlyType
		}
		return Target{Peer: p}, ""
	}
	if len(op.Ranges) == 0 {
		if op.PeerID != "" {
			tg, why := peerTarget(op.PeerID)
			if why != "" {
				return nil, why
			}
			return []Target{tg}, ""
		}
		if !allowSelf {
			return nil, SkipSelfDisabled
		}
		return []Target{{}}, ""
	}
	var out []Target
	seen := map[Target]bool{}
	for _, rg := range op.Ranges {
		if rg.From < 0 || rg.To < rg.From || rg.To >= len(batch) {
			return nil, SkipBadRange
		}
		for _, m := range batch[rg.From : rg.To+1] {
			var tg Target
			if m.PeerID == "" || m.PeerID == user {
				if !allowSelf {
					continue
				}
			} else {
				var why string
				if tg, why = peerTarget(m.PeerID); why != "" {
					continue
				}
			}
			if !seen[tg] {
				seen[tg] = true
				out = append(out, tg)
			}
		}
	}
	if len(out) == 0 {
		return nil, SkipNoTarget
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Peer < out[j].Peer })
	return out, ""
}

// MemoryPath is a document's path in the user's memory space as the
// extraction model sees it: "self/<type>" or "peer/<peer>/<type>".
func MemoryPath(t Target, typ string) string { return t.String() + "/" + typ }

// ErrPathDenied marks a write outside the permitted memory space.
var ErrPathDenied = errors.New("write denied")

// CheckMemoryPath parses path and allows it only when it names exactly a
// permitted target and type: "self/<type>" with self allowed, or
// "peer/<peer>/<type>" with an allowed peer and a type that may go to
// peers. Anything else (another user's or tenant's space, "..", absolute
// paths, unknown types) is denied with a message listing what is allowed.
func CheckMemoryPath(path string, reg *Registry, phaseTypes []MemoryType, allowSelf bool, allowedPeers []string) (Target, string, error) {
	deny := func(why string) (Target, string, error) {
		return Target{}, "", fmt.Errorf("%w: %s; only %s are writable", ErrPathDenied, why, strings.Join(WritablePaths(phaseTypes, allowSelf, allowedPeers), ", "))
	}
	parts := strings.Split(path, "/")
	var tg Target
	var typ string
	switch {
	case len(parts) == 2 && parts[0] == "self":
		if !allowSelf {
			return deny("self memory is disabled for this session")
		}
		typ = parts[1]
	case len(parts) == 3 && parts[0] == "peer":
		ok := false
		for _, p := range allowedPeers {
			ok = ok || p == parts[1]
		}
		if !ok {
			return deny(fmt.Sprintf("%q is not a peer of this batch that peer memory allows", parts[1]))
		}
		tg, typ = Target{Peer: parts[1]}, parts[2]
	default:
		return deny(fmt.Sprintf("%q is not a path of this user's memory space", path))
	}
	t, known := reg.Get(typ)
	inPhase := false
	for _, p := range phaseTypes {
		inPhase = inPhase || p.Name == typ
	}
	if !known || !inPhase {
		return deny(fmt.Sprintf("type %q is not extracted in this phase", typ))
	}
	if tg.Peer != "" && t.SelfOnly {
		return deny(fmt.Sprintf("type %q is self only", typ))
	}
	return tg, typ, nil
}

// WritablePaths lists the paths a phase may write.
func WritablePaths(types []MemoryType, allowSelf bool, allowedPeers []string) []string {
	var out []string
	for _, t := range types {
		if allowSelf {
			out = append(out, MemoryPath(Target{}, t.Name))
		}
		if !t.SelfOnly {
			for _, p := range allowedPeers {
				out = append(out, MemoryPath(Target{Peer: p}, t.Name))
			}
		}
	}
	if len(out) == 0 {
		return []string{"nothing"}
	}
	return out
}

// MergeMemory adds content's lines to doc and returns the new document and
// how many lines were added. A line already there (case- and
// space-insensitive) is not added again. A new line replaces, in its
// place at the end, every earlier line it makes stale: a near duplicate
// (NearDuplicate of its words in common: the same statement said again,
// a recurring trajectory — kept once, as last said) or a line one of whose
// clauses it says again with another value (a preference or setting that
// changed: "fixtures go in testdata/a" is dropped for "fixtures go in
// testdata/b"). Lines are never rewritten, only kept or dropped, so every
// line stays what a commit wrote.
func MergeMemory(doc, content string) (string, int) {
	var lines []mergeLine
	for _, l := range strings.Split(doc, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, newMergeLine(l))
		}
	}
	added := 0
	for _, l := range strings.Split(content, "\n") {
		l = strings.TrimRight(l, " \t")
		if strings.TrimSpace(l) == "" {
			continue
		}
		nl := newMergeLine(l)
		if slicesContainsNorm(lines, nl.norm) {
			continue
		}
		kept := lines[:0]
		for _, old := range lines {
			if !nl.replaces(old) {
				kept = append(kept, old)
			}
		}
		lines = append(kept, nl)
		added++
	}
	if len(lines) == 0 {
		return "", 0
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.text)
		b.WriteString("\n")
	}
	return b.String(), added
}

func slicesContainsNorm(lines []mergeLine, norm string) bool {
	for _, l := range lines {
		if l.norm == norm {
			return true
		}
	}
	return false
}

func normLine(l string) string {
	return strings.Join(strings.Fields(strings.ToLower(strings.TrimLeft(strings.TrimSpace(l), "-*• "))), " ")
}

// OfflineMemoryOps extracts memory deterministically, without a model, for
// the types asked: stated preferences ("I prefer", "always", "never", ...),
// profile facts ("I am", "my name is", "I work"), decisions ("we decided",
// "let's use", ...) as events, the tool-call sequence as a trajectory, and
// failed tool calls as experiences. A statement made by a peer carries its
// peer id (routing decides where it goes).
func OfflineMemoryOps(batch []*events.Message, types []string) []MemoryOp {
	want := map[string]bool{}
	for _, t := range types {
		want[t] = true
	}
	var ops []MemoryOp
	for _, m := range batch {
		if m.Role != events.RoleUser || !IsUserRequest(m) {
			continue
		}
		for _, sentence := range sentences(RequestText(m)) {
			typ := classifyStatement(sentence)
			if typ == "" || !want[typ] {
				continue
			}
			ops = append(ops, MemoryOp{Type: typ, Content: "- " + sentence, PeerID: m.PeerID})
		}
	}
	if want["trajectories"] {
		if t := trajectory(batch); t != "" {
			ops = append(ops, MemoryOp{Type: "trajectories", Content: t})
		}
	}
	if want["experiences"] {
		for _, e := range toolFailures(batch) {
			ops = append(ops, MemoryOp{Type: "experiences", Content: e})
		}
	}
	return ops
}

var statementCues = []struct {
	typ  string
	cues []string
}{
	{"preferences", []string{"i prefer", "i like", "i'd rather", "i always", "always use", "please always", "never ", "don't ever", "i hate", "i want you to"}},
	{"profile", []string{"i am ", "i'm a ", "i'm the ", "my name is", "i work ", "my role", "my team"}},
	{"events", []string{"we decided", "let's use", "let's go with", "we will use", "we'll use", "decision:", "we agreed"}},
}

func classifyStatement(s string) string {
	l := strings.ToLower(s)
	for _, c := range statementCues {
		for _, cue := range c.cues {
			if strings.HasPrefix(l, cue) || strings.Contains(l, " "+cue) {
				return c.typ
			}
		}
	}
	return ""
}

// sentences splits text into trimmed sentences (at . ! ? and newlines).
func sentences(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == '\n' || ((c == '.' || c == '!' || c == '?') && (i+1 == len(text) || text[i+1] == ' ' || text[i+1] == '\n')) {
			if s := strings.TrimSpace(text[start : i+1]); len(s) > 3 {
				out = append(out, clipRunes(s, 300))
			}
			start = i + 1
		}
	}
	if s := strings.TrimSpace(text[start:]); len(s) > 3 {
		out = append(out, clipRunes(s, 300))
	}
	return out
}

// trajectory is "- <first request>: Tool → Tool → ..." (consecutive
// repeats collapsed), or "" without tool calls.
func trajectory(batch []*events.Message) string {
	var task string
	var steps []string
	for _, m := range batch {
		if task == "" && IsUserRequest(m) {
			task = clipRunes(firstSentence(RequestText(m)), 120)
		}
		for i := range m.Content {
			if b := &m.Content[i]; b.Type == events.BlockToolUse && b.Name != "" && (len(steps) == 0 || steps[len(steps)-1] != b.Name) {
				steps = append(steps, b.Name)
			}
		}
	}
	if len(steps) == 0 {
		return ""
	}
	if len(steps) > 20 {
		steps = append(steps[:20], "…")
	}
	return "- " + orString(task, "task") + ": " + strings.Join(steps, " → ")
}

// toolFailures describes failed tool calls: "- <tool> failed: <first line>".
func toolFailures(batch []*events.Message) []string {
	names := map[string]string{}
	var out []string
	for _, m := range batch {
		for i := range m.Content {
			b := &m.Content[i]
			switch {
			case b.Type == events.BlockToolUse:
				names[b.ID] = b.Name
			case b.Type == events.BlockToolResult && b.IsError:
				text := ""
				for j := range b.Content {
					if b.Content[j].Type == events.BlockText {
						text = strings.TrimSpace(strings.SplitN(b.Content[j].Text, "\n", 2)[0])
						break
					}
				}
				out = append(out, fmt.Sprintf("- %s failed: %s", orString(names[b.ToolUseID], "a tool"), clipRunes(text, 200)))
			}
		}
	}
	return out
}
