package migrate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

// The copy keeps one invariant per shard: its migrated records are a
// prefix, in legacy order, of the legacy records that belong to it. Every
// publish expects the shard's last sequence, so a copy is stored only right
// after the one before it; a copy that failed makes every later copy to its
// shard fail too, and the attempt ends. The next attempt reads each shard's
// last migrated record (HeaderMigratedFrom) and goes on from there: a
// record is copied iff its legacy sequence is above that. Where to start
// reading the legacy stream is the highest HeaderMigratedFloor among the
// shards' last records, which is only a shortcut: records below it are
// skipped by the same test.

// maxStalls is how many attempts in a row may store nothing before the
// copy gives up (the next run resumes it).
const maxStalls = 5

// cursor is a shard's progress, read back from the shard.
type cursor struct {
	last     uint64 // the stream's last sequence: what the next copy expects
	migrated uint64 // legacy sequence of the newest migrated record (0: none)
	floor    uint64 // that record's HeaderMigratedFloor
}

// pubError is a copy that was not stored: the attempt ends and the next
// one resumes from the shards. duplicate means the shard took it for a
// duplicate of an earlier message (same Nats-Msg-Id): it is sent again
// without the id.
type pubError struct {
	legacy    uint64
	duplicate bool
	err       error
}

func (e *pubError) Error() string {
	return fmt.Sprintf("copying legacy record %d: %v", e.legacy, e.err)
}

func (e *pubError) Unwrap() error { return e.err }

// resume is copyAll's policy: a failed copy attempt is resumed at once.
var resume = retry.Policy{}

// copyAll copies every legacy record not in its shard yet, resuming after
// each failed publish, and gives up after maxStalls attempts in a row
// that stored nothing.
func (m *Migrator) copyAll(ctx context.Context) error {
	noID := map[uint64]bool{}
	stalls := 0
	return resume.Do(ctx, nil, "", func(ctx context.Context) error {
		before := m.rep.Copied
		err := m.copyAttempt(ctx, noID)
		if err == nil {
			m.log.Info("copied the legacy records", "copied", m.rep.Copied, "already_there", m.rep.Present, "skipped", m.rep.Skipped)
			return nil
		}
		var pe *pubError
		if !errors.As(err, &pe) || ctx.Err() != nil {
			return retry.Permanent(err)
		}
		if pe.duplicate {
			noID[pe.legacy] = true
		}
		if stalls++; m.rep.Copied > before {
			stalls = 0
		}
		if stalls >= maxStalls {
			return retry.Permanent(fmt.Errorf("the copy makes no progress (run the migration again to resume): %w", err))
		}
		m.log.Warn("a copy was not stored; resuming from the shards' last records", "err", err)
		return err
	})
}

// cursors reads every shard's progress; from is the first legacy
// sequence the next attempt must read.
func (m *Migrator) cursors(ctx context.Context) (cur []cursor, from uint64, err error) {
	cur = make([]cursor, m.layout.Shards())
	for k := range cur {
		if cur[k], err = m.cursor(ctx, k); err != nil {
			return nil, 0, err
		}
		from = max(from, cur[k].floor+1)
	}
	return cur, from, nil
}

// cursor reads shard k's last sequence and its newest migrated record,
// walking back over records that did not come from the migration.
func (m *Migrator) cursor(ctx context.Context, k int) (cursor, error) {
	name := events.TranscriptShardStream(k)
	s, err := m.js.Stream(ctx, name)
	if err != nil {
		return cursor{}, fmt.Errorf("reading stream %s: %w", name, err)
	}
	st := s.CachedInfo().State
	c := cursor{last: st.LastSeq}
	for seq := st.LastSeq; seq >= max(st.FirstSeq, 1); seq-- {
		msg, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return cursor{}, fmt.Errorf("reading %s record %d: %w", name, seq, err)
		}
		if v := msg.Header.Get(HeaderMigratedFrom); v != "" {
			c.migrated, err = strconv.ParseUint(v, 10, 64)
			if err != nil {
				return cursor{}, fmt.Errorf("%s record %d: %s %q: %w", name, seq, HeaderMigratedFrom, v, err)
			}
			c.floor, _ = strconv.ParseUint(msg.Header.Get(HeaderMigratedFloor), 10, 64)
			return c, nil
		}
	}
	return c, nil
}

// copyAttempt reads the legacy stream from where the shards say and
// copies what is missing, until the legacy stream's end.
func (m *Migrator) copyAttempt(ctx context.Context, noID map[uint64]bool) error {
	cur, from, err := m.cursors(ctx)
	if err != nil {
		return err
	}
	if err := m.at("resumed", m.rep.Copied); err != nil {
		return err
	}
	src, err := m.bulk.Stream(ctx, provision.StreamLegacyTranscript)
	if err != nil {
		return fmt.Errorf("reading stream %s: %w", provision.StreamLegacyTranscript, err)
	}
	info := src.CachedInfo()
	m.dedupFrom = info.State.LastTime.Add(-info.Config.Duplicates)
	from = max(from, info.State.FirstSeq)
	if info.State.Msgs == 0 || from > info.State.LastSeq {
		return nil
	}
	oc, err := src.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return fmt.Errorf("reading stream %s: %w", provision.StreamLegacyTranscript, err)
	}
	if oc.CachedInfo().NumPending == 0 {
		return nil
	}
	it, err := oc.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return fmt.Errorf("reading stream %s: %w", provision.StreamLegacyTranscript, err)
	}
	defer it.Stop()
	p := &pipeline{js: m.js, max: m.cfg.MaxInFlight, seen: from - 1}
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("reading stream %s: %w", provision.StreamLegacyTranscript, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("reading stream %s: %w", provision.StreamLegacyTranscript, err)
		}
		if err := m.copyOne(ctx, p, cur, msg, md, noID); err != nil {
			return p.abandon(ctx, err)
		}
		if md.NumPending == 0 {
			return p.drain(ctx)
		}
	}
}

// copyOne copies legacy record msg unless its shard has it.
func (m *Migrator) copyOne(ctx context.Context, p *pipeline, cur []cursor, msg jetstream.Msg, md *jetstream.MsgMetadata, noID map[uint64]bool) error {
	legacy := md.Sequence.Stream
	first := legacy > m.seenMax
	m.seenMax = max(m.seenMax, legacy)
	key, tenant, session, ok := legacySession(msg.Subject())
	if !ok {
		if first {
			m.rep.Skipped++
			m.log.Warn("left a legacy record whose subject is not a session's", "seq", legacy, "subject", msg.Subject())
		}
		return p.skip(ctx, legacy)
	}
	k := m.layout.Shard(tenant, session)
	c := &cur[k]
	if legacy <= c.migrated {
		if first {
			m.rep.Present++
		}
		return p.skip(ctx, legacy)
	}
	h := m.copyHeaders(msg.Headers(), md, noID[legacy])
	// A copy with a Nats-Msg-Id may be refused as a duplicate; the next
	// copy to its shard must not be in flight then, or a record another
	// writer put in the shard meanwhile would let it take the refused
	// copy's place. Only records inside the dedup window carry one.
	_, sync := h[jetstream.MsgIDHeader]
	if sync {
		if err := p.drain(ctx); err != nil {
			return err
		}
	}
	h[HeaderMigratedFloor] = []string{strconv.FormatUint(p.floor(), 10)}
	h[jetstream.ExpectedLastSeqHeader] = []string{strconv.FormatUint(c.last, 10)}
	if err := p.publish(ctx, &nats.Msg{Subject: m.inPrefix[k] + key, Data: msg.Data(), Header: h}, legacy); err != nil {
		return err
	}
	if sync {
		if err := p.drain(ctx); err != nil {
			return err
		}
	}
	c.last, c.migrated = c.last+1, legacy
	m.rep.Copied++
	if n := m.rep.Copied + m.rep.Present; n%4096 == 0 {
		m.progress("copy", n, int64(m.rep.LegacyRecords))
	}
	return m.at("copy", m.rep.Copied)
}

// copyHeaders are a copy's headers: the legacy record's (CloudEvents ce-*,
// trace context, Nats-Msg-Id) without those that would steer the shard's
// store (Nats-Expected-*, Nats-Rollup, Nats-TTL, Nats-Batch-*), plus
// HeaderMigratedFrom and HeaderMigratedTime. Nats-Msg-Id is kept only for
// records inside the legacy stream's last dedup window (a client may still
// retry those) and moved to HeaderOriginalMsgID otherwise: an older id may
// have been stored twice in the legacy stream, more than a window apart,
// and the shard would drop the second copy.
func (m *Migrator) copyHeaders(h nats.Header, md *jetstream.MsgMetadata, noID bool) nats.Header {
	legacy := md.Sequence.Stream
	out := make(nats.Header, len(h)+5)
	for name, v := range h {
		switch {
		case steering(name):
			continue
		case strings.EqualFold(name, jetstream.MsgIDHeader):
			if m.keepID(v, md, noID) {
				out[jetstream.MsgIDHeader] = v
			} else {
				out[HeaderOriginalMsgID] = v
			}
			continue
		}
		out[name] = v
	}
	out[HeaderMigratedFrom] = []string{strconv.FormatUint(legacy, 10)}
	out[HeaderMigratedTime] = []string{md.Timestamp.UTC().Format(time.RFC3339Nano)}
	return out
}

// keepID reports whether a record's Nats-Msg-Id stays: inside the dedup
// window, not refused as a duplicate before, and not another record's.
func (m *Migrator) keepID(v []string, md *jetstream.MsgMetadata, noID bool) bool {
	if noID || len(v) != 1 || md.Timestamp.Before(m.dedupFrom) {
		return false
	}
	if m.ids == nil {
		m.ids = map[string]uint64{}
	}
	if seq, ok := m.ids[v[0]]; ok && seq != md.Sequence.Stream {
		return false
	}
	m.ids[v[0]] = md.Sequence.Stream
	return true
}

// steering reports whether a header instructs the store (it must not be
// copied).
func steering(name string) bool {
	n := strings.ToLower(name)
	return strings.HasPrefix(n, "nats-expected-") || strings.HasPrefix(n, "nats-batch-") || n == "nats-rollup" || n == "nats-ttl"
}

// legacySession splits recall.transcript.<tenant>.<session>; key is
// "<tenant>.<session>".
func legacySession(subject string) (key, tenant, session string, ok bool) {
	key, ok = strings.CutPrefix(subject, events.SubjectTranscriptRoot+".")
	if !ok {
		return "", "", "", false
	}
	tenant, session, ok = strings.Cut(key, ".")
	if !ok || events.ValidateID(tenant) != nil || events.ValidateID(session) != nil {
		return "", "", "", false
	}
	return key, tenant, session, true
}
