package longtermsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/internal/keylock"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// committer runs commits: one at a time per user (a lock in the process,
// a lease across replicas), in the order they are asked for.
type committer struct {
	ltm, state jetstream.KeyValue
	reader     *transcript.Reader
	tenants    *tenantcfg.Store
	provider   llm.Provider
	pub        *eventpub.Publisher
	cfg        Config
	log        *slog.Logger
	m          *metrics
	locks      keylock.Locks
	holder     string
	slots      chan struct{}
}

var (
	// errNoUser refuses a commit of a session without a user.
	errNoUser = errors.New("the session has no user_id (dev.recall.session.started): long-term memory is kept per user")
	// errNothingNew means every record is committed already.
	errNothingNew = errors.New("nothing new since the last commit")
	// errPolicy marks a policy the registry rejects.
	errPolicy = errors.New("invalid memory policy")
	// errFailed marks a commit whose extraction or writes failed; it was
	// announced, and its batch is left for another attempt.
	errFailed = errors.New("commit failed")
)

// commitJob is one commit to run.
type commitJob struct {
	tenant, session, reason string
	// upTo is the newest record to commit (0: the session's last).
	upTo uint64
}

// commit runs job in consecutive parts until the session is committed up
// to job.upTo: each part is the batch that fits RECALL_LONGTERM_MAX_BATCH_CHARS
// (the oldest messages first), committed — documents, then the commit
// record, which advances only over the messages the model saw — and
// announced on its own. It returns the parts merged. A part that fails is
// announced and ends the run with errFailed (the outcome says why); the
// commit record stays before it, so the next attempt starts there.
func (c *committer) commit(ctx context.Context, job commitJob) (*events.MemoryCommitted, error) {
	started, err := c.started(ctx, job.tenant, job.session)
	if err != nil {
		return nil, err
	}
	if started == nil || started.UserID == "" {
		return nil, errNoUser
	}
	if job.upTo == 0 {
		if job.upTo, err = c.reader.LastSeq(ctx, job.tenant, job.session); err != nil {
			return nil, err
		}
	}
	var total *events.MemoryCommitted
	for {
		out, more, err := c.commitPart(ctx, job, started)
		if total != nil && errors.Is(err, errNothingNew) {
			return total, nil // another commit ran the rest
		}
		total = merged(total, out)
		if err != nil || !more {
			return total, err
		}
	}
}

// commitPart runs one part of a commit under the user's lock, lease and a
// concurrency slot; more says the session has records past the part.
func (c *committer) commitPart(ctx context.Context, job commitJob, started *events.SessionStarted) (*events.MemoryCommitted, bool, error) {
	user := started.UserID
	unlock, err := c.locks.Lock(ctx, job.tenant+"."+user)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	release, err := keylock.Lease(ctx, c.state, "leases."+job.tenant+"."+user, c.holder, c.cfg.Timeout+30*time.Second)
	if err != nil {
		return nil, false, err
	}
	defer release()
	select {
	case c.slots <- struct{}{}:
		defer func() { <-c.slots }()
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	return c.commitLocked(ctx, job, started)
}

// commitLocked commits the part of the batch after the commit record that
// fits the budget; the caller holds the user's lease. A failed extraction
// or write is announced and returned as errFailed with the outcome.
func (c *committer) commitLocked(ctx context.Context, job commitJob, started *events.SessionStarted) (*events.MemoryCommitted, bool, error) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	ctx, span := otel.Tracer("recall/longterm").Start(ctx, "commit")
	defer span.End()
	rec, rev, err := c.record(ctx, job.tenant, job.session)
	if err != nil {
		return nil, false, err
	}
	if job.upTo <= rec.LastSeq {
		return nil, false, errNothingNew
	}
	policy, reg, err := c.policy(job.tenant, started)
	if err != nil {
		return nil, false, err
	}
	user := started.UserID
	part, err := c.batch(ctx, job.tenant, job.session, rec.LastSeq+1, job.upTo)
	if err != nil {
		return nil, false, err
	}
	out := &events.MemoryCommitted{Session: job.session, User: user, Reason: job.reason, FromSeq: rec.LastSeq + 1, ToSeq: part.end,
		Messages: len(part.msgs), Policy: policy, Written: []events.MemoryWrite{}, Skipped: []events.MemorySkip{}, Phases: []string{}}
	span.SetAttributes(attribute.String("recall.tenant", job.tenant), attribute.String("recall.session", job.session), attribute.String("recall.user", user))
	out.AllowedPeers = memory.AllowedPeers(policy, user, part.msgs)
	sp := &space{tenant: job.tenant, user: user, kv: c.ltm, reg: reg, docs: map[string]*doc{}}
	err = c.extract(ctx, sp, reg.PlanPhases(policy, out.AllowedPeers), part, out)
	if err == nil {
		err = sp.save(ctx, job.session, out)
	}
	if err == nil {
		rec.Tenant, rec.Session, rec.User, rec.LastSeq, rec.At = job.tenant, job.session, user, part.end, time.Now().UTC()
		rec.Commits++
		err = c.putRecord(ctx, rec, rev)
	}
	out.DurationMS = time.Since(began).Milliseconds()
	out.Worker = c.holder
	out.Success = err == nil
	if err != nil {
		out.Error = err.Error()
		err = fmt.Errorf("%w: %w", errFailed, err)
	}
	c.announce(ctx, job.tenant, out)
	c.m.committed(ctx, out)
	return out, part.end < job.upTo, err
}

// extract runs the phases the plan allows: long-term extraction once over
// the batch, then execution extraction (self only) when the batch has tool
// work, with session skills inside it.
func (c *committer) extract(ctx context.Context, sp *space, ph memory.Phases, part batchPart, out *events.MemoryCommitted) error {
	batch, text := part.msgs, batchText(part.texts)
	if len(ph.LongTerm) > 0 {
		out.Phases = append(out.Phases, memory.GroupLongTerm)
		if err := c.runPhase(ctx, sp, phase{name: memory.GroupLongTerm, types: ph.LongTerm, allowSelf: ph.AllowSelf, peers: out.AllowedPeers}, batch, text, out); err != nil {
			return err
		}
	}
	exec := ph.Execution
	if ph.SessionSkills {
		if t, ok := sp.reg.Get(memory.SessionSkillsType); ok {
			exec = append(exec, t)
		}
	}
	if len(exec) > 0 && hasToolWork(batch) {
		out.Phases = append(out.Phases, memory.GroupExecution)
		return c.runPhase(ctx, sp, phase{name: memory.GroupExecution, types: exec, allowSelf: true}, batch, text, out)
	}
	return nil
}

func hasToolWork(batch []*events.Message) bool {
	for _, m := range batch {
		for i := range m.Content {
			if m.Content[i].Type == events.BlockToolUse {
				return true
			}
		}
	}
	return false
}

// started returns the session's dev.recall.session.started data, wherever
// it is in the session (nil when it has none). The session is read in
// bounded batches from its start and the read stops at the event.
func (c *committer) started(ctx context.Context, tenant, session string) (*events.SessionStarted, error) {
	var found *events.SessionStarted
	err := c.reader.Scan(ctx, tenant, session, 1, 0, func(r transcript.Record) bool {
		found = r.Started
		return found == nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the start of %s: %w", session, err)
	}
	return found, nil
}

// policy is the session's policy, else the tenant's default, else self on
// and peer off; it is checked against the tenant's registry.
func (c *committer) policy(tenant string, started *events.SessionStarted) (events.MemoryPolicy, *memory.Registry, error) {
	tc := c.tenants.Get(tenant)
	reg, err := memory.NewRegistry(tc.CustomMemoryTypes)
	if err != nil {
		return events.MemoryPolicy{}, nil, fmt.Errorf("%w: %v", errPolicy, err)
	}
	p := memory.DefaultMemoryPolicy()
	switch {
	case started.MemoryPolicy != nil:
		p = *started.MemoryPolicy
	case tc.MemoryPolicy != nil:
		p = *tc.MemoryPolicy
	}
	if err := reg.CheckPolicy(&p); err != nil {
		return p, nil, fmt.Errorf("%w: %v", errPolicy, err)
	}
	return p, reg, nil
}

// record reads the session's commit record (zero when none).
func (c *committer) record(ctx context.Context, tenant, session string) (events.CommitRecord, uint64, error) {
	e, err := c.state.Get(ctx, events.CommitKey(tenant, session))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return events.CommitRecord{}, 0, nil
	}
	if err != nil {
		return events.CommitRecord{}, 0, fmt.Errorf("reading the commit record of %s: %w", session, err)
	}
	var rec events.CommitRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		c.log.Warn("commit record does not decode; the session is committed from its start again", "session", session, "err", err)
		return events.CommitRecord{}, e.Revision(), nil
	}
	return rec, e.Revision(), nil
}

func (c *committer) putRecord(ctx context.Context, rec events.CommitRecord, rev uint64) error {
	b, _ := json.Marshal(rec)
	key := events.CommitKey(rec.Tenant, rec.Session)
	var err error
	if rev == 0 {
		_, err = c.state.Create(ctx, key, b)
	} else {
		_, err = c.state.Update(ctx, key, b, rev)
	}
	if err != nil {
		return fmt.Errorf("writing the commit record: %w", store.CAS(err))
	}
	return nil
}

func (c *committer) announce(ctx context.Context, tenant string, out *events.MemoryCommitted) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := c.pub.Publish(actx, events.EventsSubject(events.KindMemoryCommitted, tenant, out.Session),
		eventpub.Event{Type: events.TypeMemoryCommitted, Tenant: tenant, Session: out.Session, Data: out})
	if err != nil {
		c.log.Warn("announcing a commit failed", "session", out.Session, "err", err)
	}
}

// metrics are the service's instruments.
type metrics struct {
	commits metric.Int64Counter
	written metric.Int64Counter
	skipped metric.Int64Counter
	denied  metric.Int64Counter
	tokens  metric.Int64Counter
	queued  metric.Int64Counter
	parked  metric.Int64Counter
}

func newMetrics() *metrics {
	meter := otel.Meter("recall/longterm")
	m := &metrics{}
	m.commits, _ = meter.Int64Counter("recall_ltm_commits_total", metric.WithDescription("long-term memory commits, by outcome (success, failure) and reason"))
	m.written, _ = meter.Int64Counter("recall_ltm_documents_written_total", metric.WithDescription("memory documents written by commits, by target kind (self, peer)"))
	m.skipped, _ = meter.Int64Counter("recall_ltm_operations_skipped_total", metric.WithDescription("extracted operations routing skipped"))
	m.denied, _ = meter.Int64Counter("recall_ltm_writes_denied_total", metric.WithDescription("tool calls the write guard refused"))
	m.tokens, _ = meter.Int64Counter("recall_ltm_tokens_total", metric.WithDescription("LLM tokens spent on commits, by kind (input, output)"))
	m.queued, _ = meter.Int64Counter("recall_ltm_commits_queued_total", metric.WithDescription("commit points queued on RECALL_COMMITS"))
	m.parked, _ = meter.Int64Counter("recall_ltm_commits_parked_total", metric.WithDescription("queued commits parked after RECALL_LONGTERM_MAX_ATTEMPTS failed tries"))
	return m
}

func (m *metrics) committed(ctx context.Context, out *events.MemoryCommitted) {
	outcome := "success"
	if !out.Success {
		outcome = "failure"
	}
	m.commits.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome), attribute.String("reason", out.Reason)))
	for _, w := range out.Written {
		kind := "self"
		if strings.HasPrefix(w.Target, "peer/") {
			kind = "peer"
		}
		m.written.Add(ctx, 1, metric.WithAttributes(attribute.String("target", kind)))
	}
	m.tokens.Add(ctx, out.Usage.InputTokens+out.Usage.CacheReadTokens+out.Usage.CacheCreationTokens, metric.WithAttributes(attribute.String("kind", "input")))
	m.tokens.Add(ctx, out.Usage.OutputTokens, metric.WithAttributes(attribute.String("kind", "output")))
}
