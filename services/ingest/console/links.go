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

// Bounds of a session's links: the children and incoming references
// listed (the page says how many more there are) and the @@references
// kept per session.
const (
	maxChildren = 100
	maxRefs     = 64
)

// related is another session linked to this one: a child (its
// session.started names this one as parent), a session that referenced
// this one, or a session this one referenced with @@ (Ref as written,
// without the @@; Session and Name once the indexer resolved it; Ancestor
// N when it came as the Nth parent of a "~N" reference).
type related struct {
	Session  string `json:"session,omitempty"`
	Name     string `json:"name,omitempty"`
	Ref      string `json:"ref,omitempty"`
	Ancestor int    `json:"ancestor,omitempty"`
	Seq      uint64 `json:"seq,omitempty"`
}

// lineage is what was read of a tenant's session index (RECALL_INDEX):
// each session that has a parent or referenced others, with its links,
// up to stream sequence lastSeq of the bucket's stream. It is extended
// from there, so a page refreshed by a live update reads only the index's
// new entries. Values are replaced, never changed (see lru).
type lineage struct {
	lastSeq uint64
	links   map[string]links // by session
}

// links is what a session's index entry says of other sessions.
type links struct {
	name, parent string
	refs         []string // the sessions it referenced with @@
}

// indexLinks is the part of an index entry the lineage reads. References
// are the sessions the entry's session referenced with @@, which the
// indexer records beside the events.SessionIndex fields as it reads their
// <session-references> messages (services/indexer/indexersvc, stored): at
// most 64, in order of first reference.
type indexLinks struct {
	Name          string   `json:"name"`
	ParentSession string   `json:"parent_session"`
	References    []string `json:"references"`
}

// readLinks lists the sessions whose index entry names p.Session as their
// parent (the parent_session of their session.started) — its children —
// and those that referenced it with @@, by session id, at most
// maxChildren each (MoreChildren and MoreReferencedBy count the rest). The
// tenant's index is read once and then followed, for at most maxPageTime
// per request (p.IndexPartial then asks for another read). A failed read
// leaves the lists as read so far: the page still shows the transcript.
func (c *Console) readLinks(ctx context.Context, p *sessionPage) {
	now := c.followIndex(ctx, p)
	p.Children, p.MoreChildren = now.linking(func(l links) bool { return l.parent == p.Session })
	p.ReferencedBy, p.MoreReferencedBy = now.linking(func(l links) bool { return slices.Contains(l.refs, p.Session) })
}

// followIndex returns the tenant's lineage extended by the index entries
// written since it was read (for at most maxPageTime: p.IndexPartial).
func (c *Console) followIndex(ctx context.Context, p *sessionPage) *lineage {
	had := c.lineages.get(p.Tenant)
	prefix := "$KV." + events.BucketIndex + "." + p.Tenant + "."
	changed := map[string]*links{} // nil value: no links (or deleted)
	last, soft := had.lastSeq, time.Now().Add(maxPageTime)
	_ = transcript.ScanRaw(ctx, c.nc, "KV_"+events.BucketIndex, prefix+"*", had.lastSeq+1, 0, readBatch, func(m transcript.Raw) bool {
		last = m.Seq
		session := strings.TrimPrefix(m.Subject, prefix)
		var ix indexLinks
		if m.Header.Get("KV-Operation") != "" || m.Header.Get("Nats-Marker-Reason") != "" || json.Unmarshal(m.Data, &ix) != nil ||
			(ix.ParentSession == "" && len(ix.References) == 0) {
			changed[session] = nil
		} else {
			changed[session] = &links{name: ix.Name, parent: ix.ParentSession, refs: ix.References[:min(len(ix.References), maxRefs)]}
		}
		if time.Now().After(soft) {
			p.IndexPartial = true
			return false
		}
		return true
	})
	if last <= had.lastSeq {
		return had
	}
	now := &lineage{lastSeq: last, links: maps.Clone(had.links)}
	if now.links == nil {
		now.links = map[string]links{}
	}
	for session, l := range changed {
		if l == nil {
			delete(now.links, session)
		} else {
			now.links[session] = *l
		}
	}
	c.lineages.put(p.Tenant, now)
	return now
}

// linking lists the sessions whose links match, by session id, at most
// maxChildren, and how many more there are.
func (l *lineage) linking(match func(links) bool) (list []related, more int) {
	list = []related{}
	for session, k := range l.links {
		if match(k) {
			list = append(list, related{Session: session, Name: k.name})
		}
	}
	slices.SortFunc(list, func(a, b related) int { return strings.Compare(a.Session, b.Session) })
	if len(list) > maxChildren {
		return list[:maxChildren], len(list) - maxChildren
	}
	return list, 0
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
