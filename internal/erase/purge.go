package erase

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// purge removes every message of stream on filter (wildcards allowed)
// and returns how many it removed.
func (e *Eraser) purge(ctx context.Context, stream, filter string) (uint64, error) {
	return e.purgeSeq(ctx, stream, filter, 0)
}

// purgeSeq removes the messages of stream on filter below sequence
// keepFrom (0: all of them) and returns how many it removed. It asks the
// JetStream API directly: jetstream.Stream.Purge does not tell the count.
func (e *Eraser) purgeSeq(ctx context.Context, stream, filter string, keepFrom uint64) (uint64, error) {
	req, _ := json.Marshal(struct {
		Filter string `json:"filter"`
		Seq    uint64 `json:"seq,omitempty"`
	}{filter, keepFrom})
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	m, err := e.nc.RequestWithContext(ctx, apiPrefix(e.js)+"STREAM.PURGE."+stream, req)
	if err != nil {
		return 0, fmt.Errorf("purging %s from %s: %w", filter, stream, err)
	}
	var resp struct {
		Purged uint64 `json:"purged"`
		Error  *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return 0, fmt.Errorf("purging %s from %s: decoding the answer: %w", filter, stream, err)
	}
	if resp.Error != nil {
		return 0, fmt.Errorf("purging %s from %s: %s (%d)", filter, stream, resp.Error.Description, resp.Error.Code)
	}
	return resp.Purged, nil
}

// apiPrefix is the JetStream API prefix js uses, with its trailing dot.
func apiPrefix(js jetstream.JetStream) string {
	o := js.Options()
	if o.Domain != "" {
		return "$JS." + o.Domain + ".API."
	}
	pre := o.APIPrefix
	if pre == "" {
		pre = jetstream.DefaultAPIPrefix
	}
	if !strings.HasSuffix(pre, ".") {
		pre += "."
	}
	return pre
}

// withTimeout bounds one API call when ctx has no deadline.
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, 10*time.Second)
}

// entry returns the session's index entry (ok false when it has none or
// it does not decode).
func (e *Eraser) entry(ctx context.Context, tenant, session string) (idx events.SessionIndex, ok bool, err error) {
	kv, err := e.js.KeyValue(ctx, events.BucketIndex)
	if err != nil {
		return idx, false, fmt.Errorf("opening %s: %w", events.BucketIndex, err)
	}
	v, err := kv.Get(ctx, events.MemoryKey(tenant, session))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return idx, false, nil
	}
	if err != nil {
		return idx, false, fmt.Errorf("reading the index entry: %w", err)
	}
	return idx, json.Unmarshal(v.Value(), &idx) == nil, nil
}

// nameClaim removes the session's name claim while it names the session
// (another session may hold the name since).
func (e *Eraser) nameClaim(ctx context.Context, tenant, session, name string, r *events.EraseReceipt) error {
	if name == "" {
		return nil
	}
	kv, err := e.js.KeyValue(ctx, events.BucketIndex)
	if err != nil {
		return fmt.Errorf("opening %s: %w", events.BucketIndex, err)
	}
	key := "names." + tenant + "." + name
	claim, err := kv.Get(ctx, key)
	if err != nil || string(claim.Value()) != session {
		return nil // gone, or another session's now
	}
	n, err := e.purge(ctx, "KV_"+events.BucketIndex, "$KV."+events.BucketIndex+"."+key)
	if err != nil {
		return fmt.Errorf("erasing the name claim: %w", err)
	}
	r.Add(events.BucketIndex, "name claim", n)
	return nil
}

// owner is the session's user: the index entry's, else the commit
// record's ("" when neither names one).
func (e *Eraser) owner(ctx context.Context, tenant, session string, idx events.SessionIndex) (string, error) {
	if idx.UserID != "" {
		return idx.UserID, nil
	}
	kv, err := e.js.KeyValue(ctx, events.BucketLTMState)
	if err != nil {
		return "", fmt.Errorf("opening %s: %w", events.BucketLTMState, err)
	}
	v, err := kv.Get(ctx, events.CommitKey(tenant, session))
	if err != nil {
		return "", nil
	}
	var c events.CommitRecord
	_ = json.Unmarshal(v.Value(), &c)
	return c.User, nil
}

// contributions removes the revisions of the user's long-term memory
// documents the session wrote (events.StoredMemoryDocument.Session), the
// current ones included: a document then reads as its revision before
// the session. KV streams refuse single-message deletes, so such a
// document is rewritten: its subject purged, the revisions other sessions
// wrote put back in order (with new revision numbers). Revisions other
// sessions wrote later are kept, so a fact the model carried over from
// the session stays until the user is erased (DELETE /v1/users/{user}).
func (e *Eraser) contributions(ctx context.Context, tenant, session, user string, r *events.EraseReceipt) error {
	if user == "" || validate(user) != nil {
		return nil
	}
	stream, pre := "KV_"+events.BucketLTM, "$KV."+events.BucketLTM+"."
	type doc struct {
		kept    [][]byte
		removed uint64
	}
	docs := map[string]*doc{}
	err := transcript.ScanRaw(ctx, e.nc, stream, pre+tenant+"."+user+".>", 0, 0, 64, func(m transcript.Raw) bool {
		d := docs[m.Subject]
		if d == nil {
			d = &doc{}
			docs[m.Subject] = d
		}
		var sd events.StoredMemoryDocument
		if json.Unmarshal(m.Data, &sd) == nil && sd.Session == session {
			d.removed++
		} else if len(m.Data) > 0 {
			d.kept = append(d.kept, m.Data)
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("reading the user's long-term memory: %w", err)
	}
	kv, err := e.js.KeyValue(ctx, events.BucketLTM)
	if err != nil {
		return fmt.Errorf("opening %s: %w", events.BucketLTM, err)
	}
	for subject, d := range docs {
		if d.removed == 0 {
			continue
		}
		if _, err := e.purge(ctx, stream, subject); err != nil {
			return fmt.Errorf("erasing the session's long-term memory revisions: %w", err)
		}
		for _, v := range d.kept {
			if _, err := kv.Put(ctx, strings.TrimPrefix(subject, pre), v); err != nil {
				return fmt.Errorf("restoring another session's long-term memory revision: %w", err)
			}
		}
		r.Add(events.BucketLTM, "long-term memory revisions", d.removed)
	}
	return nil
}

// blobs removes the session's claim-checked bodies: each object's chunks
// and its metadata (no delete marker stays, since its name holds the
// ids).
func (e *Eraser) blobs(ctx context.Context, tenant, session string, r *events.EraseReceipt) error {
	obs, err := e.js.ObjectStore(ctx, events.BucketBlobs)
	if err != nil {
		return fmt.Errorf("opening %s: %w", events.BucketBlobs, err)
	}
	list, err := obs.List(ctx, jetstream.ListObjectsShowDeleted())
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		return fmt.Errorf("listing %s: %w", events.BucketBlobs, err)
	}
	stream := "OBJ_" + events.BucketBlobs
	for _, info := range list {
		if !events.BlobOwned(info.Name, tenant, session) {
			continue
		}
		if info.NUID != "" {
			if _, err := e.purge(ctx, stream, "$O."+events.BucketBlobs+".C."+info.NUID); err != nil {
				return fmt.Errorf("erasing a claim-checked body: %w", err)
			}
		}
		meta := "$O." + events.BucketBlobs + ".M." + base64.URLEncoding.EncodeToString([]byte(info.Name))
		if _, err := e.purge(ctx, stream, meta); err != nil {
			return fmt.Errorf("erasing a claim-checked body: %w", err)
		}
		if !info.Deleted {
			r.Add(events.BucketBlobs, "claim-checked bodies", 1)
		}
	}
	return nil
}

// values calls fn with the newest value of every key of bucket that
// matches filter (a key pattern, wildcards allowed), deleted keys left
// out.
func (e *Eraser) values(ctx context.Context, bucket, filter string, fn func(key string, value []byte) error) error {
	return e.watchInitial(ctx, bucket, filter, func(v jetstream.KeyValueEntry) error { return fn(v.Key(), v.Value()) })
}

// watchInitial calls fn with the newest entry of every key of bucket that
// matches filter, deleted keys left out. It reads one flow-controlled
// ordered consumer (a KV watch of the initial values), so a large bucket
// is not one large answer.
func (e *Eraser) watchInitial(ctx context.Context, bucket, filter string, fn func(jetstream.KeyValueEntry) error) error {
	kv, err := e.js.KeyValue(ctx, bucket)
	if err != nil {
		return fmt.Errorf("opening %s: %w", bucket, err)
	}
	w, err := kv.WatchFiltered(ctx, []string{filter}, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("reading %s: %w", bucket, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case v, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("reading %s: the watch ended", bucket)
			}
			if v == nil {
				return nil // the initial values are done
			}
			if err := fn(v); err != nil {
				return err
			}
		}
	}
}

// notifications purges the session's notifications kind by kind, its
// erase announcements excepted (they are the record that it was erased,
// and hold ids and counts only).
func (e *Eraser) notifications(ctx context.Context, tenant, session string, r *events.EraseReceipt) error {
	s, err := e.js.Stream(ctx, events.StreamEvents)
	if err != nil {
		return fmt.Errorf("opening %s: %w", events.StreamEvents, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(events.EventsSubject("*", tenant, session)))
	if err != nil {
		return fmt.Errorf("listing the session's notifications: %w", err)
	}
	for subject := range info.State.Subjects {
		if subject == events.EventsSubject(events.KindSessionErased, tenant, session) || subject == events.EventsSubject(events.KindUserErased, tenant, session) {
			continue
		}
		n, err := e.purge(ctx, events.StreamEvents, subject)
		if err != nil {
			return fmt.Errorf("erasing the notifications: %w", err)
		}
		r.Add(events.StreamEvents, "notifications", n)
	}
	return nil
}
