package console

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// Bounds of a session's links: the children listed (the page says how
// many more there are) and the @@references kept per session.
const (
	maxChildren = 100
	maxRefs     = 64
)

// related is another session linked to this one: a child (its
// session.started names this one as parent), or a session this one
// referenced with @@ (Ref as written, without the @@; Session and Name
// once the indexer resolved it; Ancestor N when it came as the Nth parent
// of a "~N" reference).
type related struct {
	Session  string `json:"session,omitempty"`
	Name     string `json:"name,omitempty"`
	Ref      string `json:"ref,omitempty"`
	Ancestor int    `json:"ancestor,omitempty"`
	Seq      uint64 `json:"seq,omitempty"`
}

// lineage is what was read of a tenant's session index (RECALL_INDEX):
// each session that has a parent, with its parent and name, up to stream
// sequence lastSeq of the bucket's stream. It is extended from there, so
// a page refreshed by a live update reads only the index's new entries.
// Values are replaced, never changed (see lru).
type lineage struct {
	lastSeq uint64
	parents map[string]related // child session → its parent (Session) and its own name (Name)
}

// readChildren lists the sessions whose index entry names p.Session as
// their parent (the parent_session of their session.started), by
// session id, at most maxChildren (p.MoreChildren counts the rest). The
// tenant's index is read once and then followed, for at most maxPageTime
// per request (p.IndexPartial then asks for another read). A failed read
// leaves the list as it was read so far: the page still shows the
// transcript.
func (c *Console) readChildren(ctx context.Context, p *sessionPage) {
	had := c.lineages.get(p.Tenant)
	prefix := "$KV." + events.BucketIndex + "." + p.Tenant + "."
	changed := map[string]*related{} // nil value: no parent (or deleted)
	last, soft := had.lastSeq, time.Now().Add(maxPageTime)
	_ = transcript.ScanRaw(ctx, c.nc, "KV_"+events.BucketIndex, prefix+"*", had.lastSeq+1, 0, readBatch, func(m transcript.Raw) bool {
		last = m.Seq
		session := strings.TrimPrefix(m.Subject, prefix)
		var ix events.SessionIndex
		if m.Header.Get("KV-Operation") != "" || m.Header.Get("Nats-Marker-Reason") != "" || json.Unmarshal(m.Data, &ix) != nil || ix.ParentSession == "" {
			changed[session] = nil
		} else {
			changed[session] = &related{Session: ix.ParentSession, Name: ix.Name}
		}
		if time.Now().After(soft) {
			p.IndexPartial = true
			return false
		}
		return true
	})
	now := had
	if last > had.lastSeq {
		now = &lineage{lastSeq: last, parents: maps.Clone(had.parents)}
		if now.parents == nil {
			now.parents = map[string]related{}
		}
		for session, r := range changed {
			if r == nil {
				delete(now.parents, session)
			} else {
				now.parents[session] = *r
			}
		}
		c.lineages.put(p.Tenant, now)
	}
	p.Children = []related{}
	for child, r := range now.parents {
		if r.Session == p.Session {
			p.Children = append(p.Children, related{Session: child, Name: r.Name})
		}
	}
	slices.SortFunc(p.Children, func(a, b related) int { return strings.Compare(a.Session, b.Session) })
	if len(p.Children) > maxChildren {
		p.MoreChildren = len(p.Children) - maxChildren
		p.Children = p.Children[:maxChildren]
	}
}

// addRefs keeps the sessions msg references: the @@references a user
// wrote, and the sessions the indexer resolved them to (the
// <session-references> context message it stores before the user's
// message). A reference that resolved is kept once, as its session; at
// most maxRefs are kept.
func addRefs(refs []related, msg *events.Message, seq uint64) []related {
	if msg.Role != events.RoleUser || len(refs) >= maxRefs {
		return refs
	}
	for _, b := range msg.Content {
		if b.Type != events.BlockText {
			continue
		}
		if strings.HasPrefix(b.Text, "<"+events.SessionReferenceTag+">") {
			for _, r := range parseReferences(b.Text) {
				r.Seq = seq
				refs = keepRef(refs, r)
			}
			continue
		}
		for _, r := range memory.FindRefs(b.Text) {
			refs = keepRef(refs, related{Ref: strings.TrimPrefix(r.Raw, "@@"), Seq: seq})
		}
	}
	return refs
}

// keepRef adds r unless it is known: a resolved session is kept once,
// with the written reference that named it; a written reference is kept
// as written only while no session it names is known.
func keepRef(refs []related, r related) []related {
	if len(refs) >= maxRefs {
		return refs
	}
	set := func(i int, v related) []related {
		refs = slices.Clone(refs) // a cached series shares the old array
		refs[i] = v
		return refs
	}
	if r.Session == "" {
		if i := slices.IndexFunc(refs, func(k related) bool { return k.Session != "" && k.Ancestor == 0 && resolves(k, r.Ref) }); i >= 0 {
			if refs[i].Ref == "" {
				k := refs[i]
				k.Ref = r.Ref
				return set(i, k)
			}
			return refs
		}
		if slices.ContainsFunc(refs, func(k related) bool { return k.Ref == r.Ref }) {
			return refs
		}
		return append(refs, r)
	}
	if slices.ContainsFunc(refs, func(k related) bool { return k.Session == r.Session }) {
		return refs
	}
	if r.Ancestor == 0 {
		if i := slices.IndexFunc(refs, func(k related) bool { return k.Session == "" && resolves(r, k.Ref) }); i >= 0 {
			r.Ref = refs[i].Ref
			return set(i, r)
		}
	}
	return append(refs, r)
}

// resolves reports whether the written reference ref names s (by id or
// name).
func resolves(s related, ref string) bool {
	t := refTarget(ref)
	return t == s.Session || (s.Name != "" && t == s.Name)
}

// refTarget is the session id or name a written reference names.
func refTarget(ref string) string {
	if r, err := memory.ParseRef(ref); err == nil {
		return r.Target
	}
	return ref
}

// parseReferences reads the sessions of a <session-references> message
// (memory.SessionReferenceText): a "## <name> (session <id>)" heading
// after a blank line per session, followed by "Ancestor N of <ref>." for
// an ancestor. A session's summary could hold a line of that shape after
// a blank line: it would be listed too, as a link within the tenant.
func parseReferences(text string) []related {
	var out []related
	blank := false
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		after := blank
		blank = line == ""
		if rest, ok := strings.CutPrefix(line, "## "); ok && after && strings.HasSuffix(rest, ")") {
			i := strings.LastIndex(rest, " (session ")
			if i < 0 {
				continue
			}
			r := related{Name: rest[:i], Session: strings.TrimSuffix(rest[i+len(" (session "):], ")")}
			if r.Name == "-" {
				r.Name = ""
			}
			if events.ValidateID(r.Session) == nil {
				out = append(out, r)
			}
			continue
		}
		if rest, ok := strings.CutPrefix(line, "Ancestor "); ok && len(out) > 0 {
			n, of, _ := strings.Cut(rest, " of ")
			if k, err := strconv.Atoi(n); err == nil {
				out[len(out)-1].Ancestor, out[len(out)-1].Ref = k, strings.TrimSuffix(of, ".")
			}
		}
	}
	return out
}
