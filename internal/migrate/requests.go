package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
)

// Pending requests on the work queues name a transcript position: an
// extraction request (events.ExtractionRequested.UpToSeq) and a commit
// request (events.CommitQueued.UpTo). A stored message cannot change, so
// each is queued again, translated and marked HeaderMigratedFrom with the
// original's sequence, and the original deleted. A rerun deletes the
// originals whose copy exists and queues the others. A request whose
// records are gone (its position translates to 0) is deleted: there is
// nothing left for it to do.

// reqSpec is a work queue holding requests with a position.
type reqSpec struct {
	stream, filter string
	field          []string // the position's path in the body
	// parse returns the request's session, its subject to queue a copy on,
	// and its Nats-Msg-Id for position pos.
	parse func(subject string, doc map[string]json.RawMessage) (tenant, session, requeue string, ok bool)
}

var reqSpecs = []reqSpec{
	{stream: events.StreamExtract, filter: events.SubjectExtractPartitioned + ".>", field: []string{"up_to_seq"},
		parse: func(subject string, _ map[string]json.RawMessage) (string, string, string, bool) {
			t, s, ok := events.SplitSessionSubject(subject)
			return t, s, events.ExtractSubject(t, s), ok
		}},
	{stream: events.StreamCommits, filter: events.SubjectCommitPartitioned + ".>", field: []string{"up_to"},
		parse: func(subject string, doc map[string]json.RawMessage) (string, string, string, bool) {
			t, user, ok := events.SplitSessionSubject(subject)
			var session string
			if err := json.Unmarshal(doc["session"], &session); err != nil || events.ValidateID(session) != nil {
				return "", "", "", false
			}
			return t, session, events.CommitSubject(t, user), ok
		}},
}

// reqItem is a pending request to queue again (or whose copy exists).
type reqItem struct {
	spec            *reqSpec
	seq             uint64
	tenant, session string
	requeue         string
	mark            *mark
	copied          bool
}

// collectRequests reads the pending requests.
func (m *Migrator) collectRequests(ctx context.Context, p *positions) ([]*reqItem, error) {
	var items []*reqItem
	for i := range reqSpecs {
		spec := &reqSpecs[i]
		copied := map[uint64]bool{}
		var mine []*reqItem
		err := m.eachMsg(ctx, spec.stream, spec.filter, func(raw *jetstream.RawStreamMsg) {
			if from := raw.Header.Get(HeaderMigratedFrom); from != "" {
				seq, _ := strconv.ParseUint(from, 10, 64)
				copied[seq] = true
				return
			}
			doc, err := decodeDoc(raw.Data)
			var pos uint64
			if err == nil {
				pos, err = getPath(doc, spec.field)
			}
			tenant, session, requeue, ok := "", "", "", false
			if err == nil {
				tenant, session, requeue, ok = spec.parse(raw.Subject, doc)
			}
			if !ok {
				m.log.Warn("left a request that does not decode", "stream", spec.stream, "seq", raw.Sequence, "err", err)
				return
			}
			mine = append(mine, &reqItem{spec: spec, seq: raw.Sequence, tenant: tenant, session: session, requeue: requeue, mark: p.add(tenant, session, pos, false)})
		})
		if err != nil {
			return nil, err
		}
		for _, it := range mine {
			it.copied = copied[it.seq]
		}
		items = append(items, mine...)
	}
	return items, nil
}

// eachMsg calls fn with every message of stream on filter, in order.
func (m *Migrator) eachMsg(ctx context.Context, stream, filter string, fn func(*jetstream.RawStreamMsg)) error {
	s, err := m.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading stream %s: %w", stream, err)
	}
	for seq := s.CachedInfo().State.FirstSeq; ; {
		raw, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading stream %s: %w", stream, err)
		}
		fn(raw)
		seq = raw.Sequence + 1
	}
}

// applyRequests queues every pending request again, translated, and
// deletes the originals.
func (m *Migrator) applyRequests(ctx context.Context, items []*reqItem, p *positions) error {
	for i, it := range items {
		if err := m.requeue(ctx, it, p); err != nil {
			return err
		}
		if err := m.at("request", int64(i+1)); err != nil {
			return err
		}
	}
	return nil
}

// requeue queues it's translated copy (unless it exists) and deletes it.
func (m *Migrator) requeue(ctx context.Context, it *reqItem, p *positions) error {
	s, err := m.handle(ctx, it.spec.stream)
	if err != nil {
		return err
	}
	pos := p.value(it.mark)
	if !it.copied && pos > 0 {
		if err := m.publishCopy(ctx, s, it, pos); err != nil {
			return err
		}
		m.rep.Translated[it.spec.stream]++
	}
	if !it.copied && pos == 0 {
		m.log.Warn("dropped a request whose transcript records are gone", "stream", it.spec.stream, "seq", it.seq)
		m.rep.Dropped[it.spec.stream]++
	}
	if err := s.DeleteMsg(ctx, it.seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("deleting request %d of %s: %w", it.seq, it.spec.stream, err)
	}
	return nil
}

// publishCopy queues the original's translated copy: the same headers but
// a new id (Nats-Msg-Id and, for an event, ce-id) and HeaderMigratedFrom.
func (m *Migrator) publishCopy(ctx context.Context, s jetstream.Stream, it *reqItem, pos uint64) error {
	raw, err := s.GetMsg(ctx, it.seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading request %d of %s: %w", it.seq, it.spec.stream, err)
	}
	doc, err := decodeDoc(raw.Data)
	if err == nil {
		err = setPath(doc, it.spec.field, pos)
	}
	if err != nil {
		return fmt.Errorf("request %d of %s: %w", it.seq, it.spec.stream, err)
	}
	out := nats.NewMsg(it.requeue)
	if out.Data, err = json.Marshal(doc); err != nil {
		return fmt.Errorf("request %d of %s: %w", it.seq, it.spec.stream, err)
	}
	id := fmt.Sprintf("%s:%s:%d:migrated:%d", it.tenant, it.session, pos, it.seq)
	for name, v := range raw.Header {
		if !steering(name) && !directGetHeader(name) {
			out.Header[name] = v
		}
	}
	out.Header.Set(jetstream.MsgIDHeader, id)
	for name := range out.Header {
		if strings.EqualFold(name, "ce-id") {
			out.Header[name] = []string{id}
		}
	}
	out.Header.Set(HeaderMigratedFrom, strconv.FormatUint(it.seq, 10))
	if _, err := m.js.PublishMsg(ctx, out); err != nil {
		return fmt.Errorf("queueing request %d of %s again: %w", it.seq, it.spec.stream, err)
	}
	return nil
}

// directGetHeader reports whether a header is one a Direct Get reply adds
// (the stored message does not have it).
func directGetHeader(name string) bool {
	switch strings.ToLower(name) {
	case "nats-stream", "nats-subject", "nats-sequence", "nats-time-stamp", "nats-last-sequence", "nats-num-pending":
		return true
	}
	return false
}
