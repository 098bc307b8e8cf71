package erase

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/pkg/events"
)

// User erases a user's long-term memory: the user's self and peer
// documents with their history, the documents other users hold about the
// user as a peer, the commit records of the user's sessions, the user's
// commit lease and queued commits. With sessions, the user's sessions are
// erased first, each as Session does (tombstones first, one drain for
// all); they are found through the session index (entries carry user_id)
// and the commit records. The erase is announced as
// events.TypeUserErased on EventsSubject(KindUserErased, tenant, user).
//
// Not guaranteed: a commit of one of the user's sessions that is running
// during the erase may write a document again; erase the user with
// sessions (whose tombstones stop further commits) or again after it.
func (e *Eraser) User(ctx context.Context, tenant, user string, sessions bool, by Actor) (events.EraseReceipt, error) {
	r := events.EraseReceipt{Tenant: tenant, User: user, Parts: []events.ErasedPart{}, ErasedAt: time.Now().UTC()}
	if err := validate(tenant, user); err != nil {
		return r, err
	}
	owned, err := e.UserSessions(ctx, tenant, user)
	if err != nil {
		return r, err
	}
	if sessions && len(owned) > 0 {
		if r.Sessions, err = e.sessions(ctx, tenant, owned, by); err != nil {
			return r, err
		}
	}
	if err := e.userTraces(ctx, tenant, user, owned, &r); err != nil {
		return r, err
	}
	data := events.Erased{User: user, Parts: r.Parts, Total: r.Total, Sessions: len(r.Sessions), Operator: by.Operator, Reason: by.Reason}
	if err := e.pub.Publish(ctx, events.EventsSubject(events.KindUserErased, tenant, user),
		eventpub.Event{Type: events.TypeUserErased, Tenant: tenant, Session: user, Data: data}); err != nil {
		return r, fmt.Errorf("announcing the erase: %w", err)
	}
	e.log.InfoContext(ctx, "user erased", "tenant", tenant, "user", user, "removed", r.Total, "sessions", len(r.Sessions), "operator", by.Operator)
	return r, nil
}

// userTraces removes the user's long-term memory and commit state.
func (e *Eraser) userTraces(ctx context.Context, tenant, user string, owned []string, r *events.EraseReceipt) error {
	ltm := func(what, key string) part {
		return part{"KV_" + events.BucketLTM, "$KV." + events.BucketLTM + "." + key, events.BucketLTM, what}
	}
	state := func(what, key string) part {
		return part{"KV_" + events.BucketLTMState, "$KV." + events.BucketLTMState + "." + key, events.BucketLTMState, what}
	}
	parts := []part{
		ltm("long-term memory", tenant+"."+user+".>"),
		ltm("peer documents about the user", tenant+".*.peer."+user+".*"),
		state("commit lease", "leases."+tenant+"."+user),
		{events.StreamCommits, events.SubjectCommitPartitioned + ".*." + tenant + "." + user, events.StreamCommits, "queued commits"},
	}
	for _, s := range owned {
		parts = append(parts, state("commit record", events.CommitKey(tenant, s)))
	}
	for _, p := range parts {
		n, err := e.purge(ctx, p.stream, p.filter)
		if err != nil {
			return fmt.Errorf("erasing the %s: %w", p.what, err)
		}
		r.Add(p.store, p.what, n)
	}
	return nil
}

// UserSessions returns the ids of the user's sessions, sorted: those
// whose index entry names the user, and those whose commit record does.
func (e *Eraser) UserSessions(ctx context.Context, tenant, user string) ([]string, error) {
	found := map[string]bool{}
	err := e.values(ctx, events.BucketIndex, tenant+".*", func(key string, v []byte) error {
		var idx events.SessionIndex
		if json.Unmarshal(v, &idx) == nil && idx.UserID == user && idx.Tenant == tenant && validate(idx.Session) == nil {
			found[idx.Session] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finding the user's sessions in the index: %w", err)
	}
	err = e.values(ctx, events.BucketLTMState, "commits."+tenant+".*", func(key string, v []byte) error {
		var c events.CommitRecord
		if json.Unmarshal(v, &c) == nil && c.User == user && c.Tenant == tenant && validate(c.Session) == nil {
			found[c.Session] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finding the user's sessions in the commit records: %w", err)
	}
	out := make([]string, 0, len(found))
	for s := range found {
		out = append(out, s)
	}
	sort.Strings(out)
	return out, nil
}

// sessions erases several sessions: every tombstone first, one drain,
// then each session's traces and announcement.
func (e *Eraser) sessions(ctx context.Context, tenant string, ids []string, by Actor) ([]events.EraseReceipt, error) {
	out := make([]events.EraseReceipt, len(ids))
	for i, s := range ids {
		until, err := e.tombstone(ctx, tenant, s)
		if err != nil {
			return nil, err
		}
		out[i] = events.EraseReceipt{Tenant: tenant, Session: s, Parts: []events.ErasedPart{}, TombstoneUntil: until, ErasedAt: time.Now().UTC()}
	}
	if err := e.drain(ctx); err != nil {
		return nil, err
	}
	for i := range out {
		if err := e.finish(ctx, &out[i], by); err != nil {
			return nil, err
		}
	}
	return out, nil
}
