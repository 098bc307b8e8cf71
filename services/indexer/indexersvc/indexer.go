package indexersvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/internal/keylock"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/pkg/retry"
)

// Indexer keeps the session index: it indexes sessions when their
// thresholds are met, and serves reads, forced indexings, references and
// questions. It is safe for concurrent use.
type Indexer struct {
	nc      *nats.Conn
	entries *entries
	mem     *store.Memory
	reader  *reads
	tenants *tenantcfg.Store
	pub     *eventpub.Publisher
	cfg     Config
	log     *slog.Logger
	m       *metrics

	// provider is nil when indexing is disabled (disabled says why).
	provider llm.Provider
	disabled string
	prices   map[string]price

	locks  keylock.Locks
	holder string // names this replica in leases
	slots  chan struct{}
	admit  *microapi.Admission // reindex, resolve, query: per tenant and in all

	mu       sync.Mutex
	sessions map[string]*counter // by MemoryKey
}

// counter holds the sequences of a session's user requests after its last
// indexing, as far as this process knows: those the consumer saw and, once
// known, those a transcript count found.
type counter struct {
	known      bool     // a transcript count since indexedSeq was merged in
	indexedSeq uint64   // the last indexing's LastIndexedSeq
	seqs       []uint64 // user requests > indexedSeq (sorted, distinct, capped)
}

// maxCounters bounds the counters kept; beyond it one is dropped (and
// recounted from the transcript if it comes back).
const maxCounters = 100000

// maxCounted caps the sequences a counter keeps (thresholds are small).
const maxCounted = 1000

// add inserts seq if it is after indexedSeq and new.
func (c *counter) add(seq uint64) {
	if seq <= c.indexedSeq || len(c.seqs) >= maxCounted {
		return
	}
	i := len(c.seqs)
	for i > 0 && c.seqs[i-1] >= seq {
		if c.seqs[i-1] == seq {
			return
		}
		i--
	}
	c.seqs = append(c.seqs, 0)
	copy(c.seqs[i+1:], c.seqs[i:])
	c.seqs[i] = seq
}

// observe records a user request of key at seq.
func (x *Indexer) observe(key string, seq uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	c := x.sessions[key]
	if c == nil {
		if len(x.sessions) >= maxCounters {
			for k := range x.sessions {
				delete(x.sessions, k)
				break
			}
		}
		c = &counter{}
		x.sessions[key] = c
	}
	c.add(seq)
}

// pending returns how many user requests of key follow indexedSeq, and
// whether that is known (else the transcript must be counted).
func (x *Indexer) pending(key string, indexedSeq uint64) (int, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	c := x.sessions[key]
	if c == nil || !c.known || c.indexedSeq != indexedSeq {
		return 0, false
	}
	return len(c.seqs), true
}

// setCounted records an indexing up to indexedSeq (or a transcript
// count after it) and the user requests found after it; requests the
// consumer saw after indexedSeq are kept.
func (x *Indexer) setCounted(key string, indexedSeq uint64, found []uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	old := x.sessions[key]
	c := &counter{known: true, indexedSeq: indexedSeq}
	for _, s := range found {
		c.add(s)
	}
	if old != nil {
		for _, s := range old.seqs {
			c.add(s)
		}
	}
	x.sessions[key] = c
}

// errDisabled means indexing is off (configuration or missing model).
var errDisabled = errors.New("indexing is disabled")

// errEphemeral refuses to index an ephemeral session.
var errEphemeral = errors.New("the session is ephemeral; ephemeral sessions are never indexed")

// errNothingNew means the index already covers every record.
var errNothingNew = errors.New("nothing new since the last indexing")

// indexJob is one indexing to consider.
type indexJob struct {
	tenant, session string
	reason          string
	// seq is the record that caused it (0 when forced).
	seq uint64
}

// maybeIndex runs job if its threshold still holds once the session's
// lock is held; it returns the outcome (nil when nothing ran).
func (x *Indexer) maybeIndex(ctx context.Context, job indexJob) (*events.SessionIndexed, error) {
	key := events.MemoryKey(job.tenant, job.session)
	unlock, err := x.locks.Lock(ctx, key)
	if err != nil {
		return nil, err
	}
	defer unlock()
	release, err := x.entries.lease(ctx, job.tenant, job.session, x.holder, x.cfg.Timeout+30*time.Second)
	if err != nil {
		return nil, err
	}
	defer release()
	select {
	case x.slots <- struct{}{}:
		defer func() { <-x.slots }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	idx, _, err := x.entries.get(ctx, job.tenant, job.session)
	if err != nil && !errors.Is(err, errNotFound) {
		return nil, err
	}
	if idx.Ephemeral {
		if job.reason == events.IndexReasonForced {
			return nil, errEphemeral
		}
		return nil, nil
	}
	if !tenantcfg.Bool(x.tenants.Get(job.tenant).SessionIndex, true) && job.reason != events.IndexReasonForced {
		return nil, nil
	}
	if job.seq > 0 && job.seq <= idx.LastIndexedSeq {
		return nil, nil // a redelivery, or covered by a later indexing
	}
	if job.reason == events.IndexReasonTurnEnd {
		ok, err := x.thresholdMet(ctx, key, job, idx)
		if err != nil || !ok {
			return nil, err
		}
	}
	if x.provider == nil {
		return nil, fmt.Errorf("%w: %s", errDisabled, x.disabled)
	}
	return x.index(ctx, job, idx)
}

// thresholdMet reports whether enough user requests follow the last
// indexing, recounting from the transcript when the counter is unknown.
func (x *Indexer) thresholdMet(ctx context.Context, key string, job indexJob, idx events.SessionIndex) (bool, error) {
	min := x.cfg.MinNewUserMessages
	if n := x.tenants.Get(job.tenant).MinNewUserMessages; n > 0 {
		min = n
	}
	n, known := x.pending(key, idx.LastIndexedSeq)
	if !known {
		var found []uint64
		err := x.reader.Scan(ctx, job.tenant, job.session, idx.LastIndexedSeq+1, job.seq, func(r transcript.Record) bool {
			if r.Message != nil && memory.CountsAsIndexRequest(r.Message) {
				found = append(found, r.Seq)
			}
			return true
		})
		if err != nil {
			return false, fmt.Errorf("counting user requests of %s: %w", job.session, err)
		}
		x.setCounted(key, idx.LastIndexedSeq, found)
		n, _ = x.pending(key, idx.LastIndexedSeq)
	}
	return n >= min, nil
}

// sessionText is what a transcript read yields for indexing.
type sessionText struct {
	msgs     []*events.Message
	seqs     []uint64 // msgs' stream sequences
	bytes    int
	lastSeq  uint64
	lastID   string
	first    time.Time
	last     time.Time
	model    string
	started  *events.SessionStarted
	ended    bool
	requests int
	refs     []string // the sessions its <session-references> messages name
}

// readSession reads the session's transcript from sequence from, keeping
// the user and assistant text messages within about maxBytes from the end
// and the sessions its <session-references> messages name.
// The oldest message kept (seqs[0]) is where the next read can start: the
// tail only moves forward as the session grows, and the facts read here
// are merged into the entry's (applyFacts), so a long session is not read
// whole on every indexing.
func (x *Indexer) readSession(ctx context.Context, tenant, session string, from uint64) (sessionText, error) {
	var st sessionText
	err := x.reader.Scan(ctx, tenant, session, from, 0, func(r transcript.Record) bool {
		if st.first.IsZero() {
			st.first = r.Time
		}
		st.last, st.lastSeq, st.lastID = r.Time, r.Seq, r.Event.ID()
		switch {
		case r.Started != nil && st.started == nil:
			st.started = r.Started // the first one names the owner
		case r.Ended != nil:
			st.ended = true
		case r.Message != nil:
			m := r.Message
			if m.Role == events.RoleAssistant && m.Model != "" {
				st.model = m.Model
			}
			if memory.CountsAsIndexRequest(m) {
				st.requests++
			}
			if memory.IsSessionReference(m) {
				st.refs = append(st.refs, referencedSessions(m.Content[0].Text)...)
			}
			if t := memory.RequestText(m); t != "" && (m.Role == events.RoleUser || m.Role == events.RoleAssistant) {
				st.msgs, st.seqs = append(st.msgs, m), append(st.seqs, r.Seq)
				st.bytes += len(t)
				for st.bytes > 2*x.cfg.MaxInputBytes && len(st.msgs) > 1 {
					st.bytes -= len(memory.RequestText(st.msgs[0]))
					st.msgs, st.seqs = st.msgs[1:], st.seqs[1:]
				}
			}
		}
		return true
	})
	return st, err
}

// index runs one indexing of the session and stores and announces its
// outcome. The caller holds the session's lock.
func (x *Indexer) index(ctx context.Context, job indexJob, idx events.SessionIndex) (*events.SessionIndexed, error) {
	ctx, cancel := context.WithTimeout(ctx, x.cfg.Timeout)
	defer cancel()
	began := time.Now()
	out := &events.SessionIndexed{Session: job.session, Reason: job.reason, Model: x.provider.Model()}
	st, err := x.readSession(ctx, job.tenant, job.session, x.readFrom(idx))
	if err != nil {
		return nil, fmt.Errorf("reading the transcript of %s: %w", job.session, err)
	}
	if st.lastSeq == 0 || (st.lastSeq <= idx.LastIndexedSeq && job.reason != events.IndexReasonForced) {
		return nil, errNothingNew
	}
	if idx.Ephemeral || (st.started != nil && st.started.Ephemeral) {
		_, _, _ = x.entries.update(ctx, job.tenant, job.session, func(e *events.SessionIndex) bool { applyFacts(e, st); return true })
		if job.reason == events.IndexReasonForced {
			return nil, errEphemeral
		}
		return nil, nil
	}
	md, err := x.generate(ctx, memory.IndexInput(st.msgs, x.cfg.MaxInputBytes), out)
	// Storing and announcing get their own time once the model answered.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer scancel()
	if err == nil {
		err = x.store(sctx, job, md, st, out)
	}
	out.DurationMS = time.Since(began).Milliseconds()
	out.CostUSD = cost(x.prices, out.Model, out.Usage.InputTokens+out.Usage.CacheCreationTokens+out.Usage.CacheReadTokens, out.Usage.OutputTokens)
	if err != nil {
		out.Error = err.Error()
	} else {
		out.Success = true
	}
	x.announce(sctx, job.tenant, out)
	x.m.indexed(sctx, out)
	if err != nil {
		return out, nil // the failure is the outcome, announced
	}
	x.setCounted(events.MemoryKey(job.tenant, job.session), out.LastIndexedSeq, nil)
	return out, nil
}

// maxIndexAttempts bounds model calls per indexing: malformed output is
// retried twice.
const maxIndexAttempts = 3

// reask is generate's policy: a malformed answer is asked again at once,
// maxIndexAttempts calls in all.
var reask = retry.Policy{Attempts: maxIndexAttempts}

// generate asks the model for metadata, retrying malformed answers (with
// the error shown to the model); transport and provider errors end it.
func (x *Indexer) generate(ctx context.Context, input string, out *events.SessionIndexed) (memory.IndexMetadata, error) {
	msgs := []events.Message{{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "<conversation>\n" + input + "\n</conversation>"}}}}
	var md memory.IndexMetadata
	var malformed error // the last answer that was not valid metadata
	err := reask.Do(ctx, nil, "", func(ctx context.Context) error {
		out.Attempts++
		resp, err := x.provider.Complete(ctx, llm.Request{System: memory.IndexSystemPrompt, Messages: msgs, MaxTokens: 2048, CacheAfter: -1, Task: llm.TaskIndex})
		if err != nil {
			return retry.Permanent(fmt.Errorf("calling %s: %w", x.provider.Name(), err))
		}
		out.Usage = out.Usage.Add(resp.Usage)
		if resp.Model != "" {
			out.Model = resp.Model
		}
		if md, err = memory.ParseIndexOutput(resp.Text); err == nil {
			return nil
		}
		malformed = err
		x.log.Warn("malformed index metadata", "attempt", out.Attempts, "err", err)
		msgs = append(msgs,
			events.Message{Role: events.RoleAssistant, Content: events.Content{{Type: events.BlockText, Text: orSpace(resp.Text)}}},
			events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "That answer is invalid: " + err.Error() + ". Answer again with only the JSON object."}}})
		return err
	})
	switch {
	case err == nil:
		return md, nil
	case malformed != nil && errors.Is(err, malformed): // every attempt malformed
		return memory.IndexMetadata{}, fmt.Errorf("%d answers were not valid metadata, the last: %w", out.Attempts, malformed)
	}
	return memory.IndexMetadata{}, err
}

func orSpace(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(empty)"
	}
	return s
}

// readFrom is the sequence an indexing of the session reads from: the tail
// the last one kept (ReadFromSeq), unless this indexer keeps more input
// than that tail was kept for — then the first record.
func (x *Indexer) readFrom(idx events.SessionIndex) uint64 {
	if idx.ReadFromBytes > 0 && idx.ReadFromBytes < x.cfg.MaxInputBytes {
		return 1
	}
	return max(idx.ReadFromSeq, 1)
}

// store writes the metadata with compare-and-set, claiming a unique name.
func (x *Indexer) store(ctx context.Context, job indexJob, md memory.IndexMetadata, st sessionText, out *events.SessionIndexed) error {
	var oldName string
	idx, _, err := x.entries.get(ctx, job.tenant, job.session)
	if err == nil {
		oldName = idx.Name
	}
	name := oldName
	if oldName == "" || !memory.IsNameVariant(oldName, md.Name, job.session) {
		name, err = x.entries.claimName(ctx, job.tenant, job.session, md.Name)
		if err != nil {
			return err
		}
	}
	_, _, err = x.entries.modify(ctx, job.tenant, job.session, func(v *stored) bool {
		e := &v.SessionIndex
		v.refer(st.refs) // those read again are known: a read from the start re-derives them
		applyFacts(e, st)
		e.Name, e.Description, e.Summary, e.Tags = name, md.Description, md.Summary, md.Tags
		e.LastIndexedSeq, e.LastIndexedID = st.lastSeq, st.lastID
		e.IndexedAt, e.IndexModel = time.Now().UTC(), out.Model
		if len(st.seqs) > 0 {
			if x.readFrom(*e) == 1 {
				e.ReadFromSeq = st.seqs[0] // read whole: the tail may move back
			} else {
				e.ReadFromSeq = max(e.ReadFromSeq, st.seqs[0])
			}
			e.ReadFromBytes = x.cfg.MaxInputBytes
		}
		return true
	})
	if err != nil {
		return err
	}
	if name != oldName {
		x.entries.releaseName(ctx, job.tenant, job.session, oldName)
	}
	out.Name, out.LastIndexedSeq = name, st.lastSeq
	return nil
}

// applyFacts copies the transcript's facts into e.
func applyFacts(e *events.SessionIndex, st sessionText) {
	if s := st.started; s != nil {
		e.ParentSession, e.CWD, e.Ephemeral = s.ParentSession, s.CWD, s.Ephemeral
		if e.UserID == "" {
			// The owner is the user of the session's first
			// session.started, as long-term memory has it: a later one
			// naming another user does not move the session.
			e.UserID, e.AgentID = s.UserID, s.AgentID
		}
		if s.Model != "" {
			e.Model = s.Model
		}
	}
	if st.model != "" {
		e.Model = st.model
	}
	if !st.first.IsZero() && (e.CreatedAt.IsZero() || st.first.Before(e.CreatedAt)) {
		e.CreatedAt = st.first.UTC()
	}
	if st.last.After(e.UpdatedAt) {
		e.UpdatedAt = st.last.UTC()
	}
	e.Ended = e.Ended || st.ended
}

// announce publishes the outcome on the events stream (logged, not
// fatal: the index entry is stored already).
func (x *Indexer) announce(ctx context.Context, tenant string, out *events.SessionIndexed) {
	typ, kind := events.TypeSessionIndexed, events.KindSessionIndexed
	if !out.Success {
		typ, kind = events.TypeSessionIndexFailed, events.KindSessionIndexFailed
	}
	err := x.pub.Publish(ctx, events.EventsSubject(kind, tenant, out.Session), eventpub.Event{Type: typ, Tenant: tenant, Session: out.Session, Data: out})
	if err != nil {
		x.log.Warn("announcing an indexing failed", "session", out.Session, "err", err)
	}
}

// noteStarted stores a session's start facts (parent, cwd, ephemeral,
// user, agent, model) as they arrive, so they are listed before the first
// indexing.
func (x *Indexer) noteStarted(ctx context.Context, tenant, session string, s *events.SessionStarted, at time.Time) error {
	_, _, err := x.entries.update(ctx, tenant, session, func(e *events.SessionIndex) bool {
		applyFacts(e, sessionText{started: s, first: at, last: at})
		return true
	})
	return err
}

// noteReferences records the sessions a <session-references> context
// message of session names (stored.References) as it arrives, so the
// console can list who referenced a session without reading transcripts.
// A message naming only sessions already recorded writes nothing.
func (x *Indexer) noteReferences(ctx context.Context, tenant, session string, m *events.Message, at time.Time) error {
	refs := referencedSessions(m.Content[0].Text)
	if len(refs) == 0 {
		return nil
	}
	_, _, err := x.entries.modify(ctx, tenant, session, func(v *stored) bool {
		if !v.refer(refs) {
			return false
		}
		applyFacts(&v.SessionIndex, sessionText{first: at, last: at})
		return true
	})
	return err
}
