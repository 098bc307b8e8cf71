package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/pkg/events"
)

// maxDocuments bounds the long-term memory documents one user page reads
// (each with the revisions RECALL_LTM keeps).
const maxDocuments = 64

// document is a user's long-term memory document and its kept revisions,
// oldest first.
type document struct {
	Key       string        `json:"key"`
	Peer      string        `json:"peer,omitempty"`
	Type      string        `json:"type"`
	Revisions []docRevision `json:"revisions"`
}

type docRevision struct {
	Revision uint64    `json:"revision"`
	Time     time.Time `json:"time"`
	Content  string    `json:"content"`
	Session  string    `json:"session,omitempty"`
}

// userMemory answers a user's long-term memory documents (self and per
// peer) with their kept revisions, read from RECALL_LTM.
func (c *Console) userMemory(w http.ResponseWriter, r *http.Request) {
	_, tenant, ok := c.tenantOf(w, r)
	if !ok {
		return
	}
	user := r.PathValue("user")
	if err := events.ValidateID(user); err != nil {
		fail(w, http.StatusBadRequest, "user: "+err.Error())
		return
	}
	release, ok := c.admit(w, r, tenant, "GET /console/api/tenants/{tenant}/users/{user}/memory")
	if !ok {
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	docs, err := c.readDocuments(ctx, tenant, user)
	if err != nil {
		unavailable(w, err)
		return
	}
	writeJSON(w, map[string]any{"tenant": tenant, "user": user, "documents": docs})
}

func (c *Console) readDocuments(ctx context.Context, tenant, user string) ([]document, error) {
	docs := []document{}
	kv, err := c.js.KeyValue(ctx, events.BucketLTM)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return docs, nil
	}
	if err != nil {
		return nil, err
	}
	prefix := tenant + "." + user + "."
	lister, err := kv.ListKeysFiltered(ctx, prefix+">")
	if err != nil {
		return nil, err
	}
	var keys []string
	for key := range lister.Keys() {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys[:min(len(keys), maxDocuments)] {
		hist, err := kv.History(ctx, key)
		if err != nil {
			continue // deleted meanwhile
		}
		d := document{Key: key}
		rest := strings.TrimPrefix(key, prefix)
		if p, ok := strings.CutPrefix(rest, "peer."); ok {
			d.Peer, d.Type, _ = strings.Cut(p, ".")
		} else {
			d.Type = strings.TrimPrefix(rest, "self.")
		}
		for _, e := range hist {
			var doc events.StoredMemoryDocument
			if e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &doc) == nil {
				d.Revisions = append(d.Revisions, docRevision{Revision: e.Revision(), Time: e.Created(), Content: doc.Content, Session: doc.Session})
			}
		}
		if len(d.Revisions) > 0 {
			docs = append(docs, d)
		}
	}
	return docs, nil
}

// tenantSummary is one line of the operators' overview.
type tenantSummary struct {
	Tenant   string `json:"tenant"`
	Sessions int    `json:"sessions"`
	Records  uint64 `json:"records"`
	Parked   int    `json:"parked"`
}

// overview answers every tenant's sessions, records and parked requests
// (operators only): one read of each transcript shard stream's
// per-subject state and one of RECALL_PARKED.
func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	id, ok := c.identify(w, r)
	if !ok {
		return
	}
	if !id.Operator {
		fail(w, http.StatusForbidden, "the overview of every tenant needs an operator token")
		return
	}
	release, ok := c.admit(w, r, "", "GET /console/api/overview")
	if !ok {
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	by := map[string]*tenantSummary{}
	get := func(t string) *tenantSummary {
		if by[t] == nil {
			by[t] = &tenantSummary{Tenant: t}
		}
		return by[t]
	}
	for _, t := range c.cfg.Tenants {
		get(t)
	}
	err := c.subjectCounts(ctx, events.AllTranscripts, func(tenant, _ string, n uint64) {
		s := get(tenant)
		s.Sessions++
		s.Records += n
	})
	if err != nil {
		unavailable(w, err)
		return
	}
	if list, err := parked.List(ctx, c.js); err == nil {
		for _, p := range list {
			get(cmp.Or(viewParked(p).Tenant, "unknown")).Parked++
		}
	}
	out := make([]*tenantSummary, 0, len(by))
	for _, s := range by {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *tenantSummary) int { return strings.Compare(a.Tenant, b.Tenant) })
	writeJSON(w, map[string]any{"tenants": out})
}
