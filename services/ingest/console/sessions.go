package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// maxSessions bounds the sessions page (the most recently active first).
const maxSessions = 500

// sessionRow is one line of the sessions page.
type sessionRow struct {
	Session      string    `json:"session"`
	Records      uint64    `json:"records"`
	LastSeq      uint64    `json:"last_seq"`
	LastActivity time.Time `json:"last_activity"`
	// Memory: its revision, how far it covers, when it was written.
	MemoryRevision    uint64    `json:"memory_revision,omitempty"`
	LastSummarizedSeq uint64    `json:"last_summarized_seq,omitempty"`
	Extractions       int       `json:"extractions,omitempty"`
	MemoryUpdated     time.Time `json:"memory_updated,omitzero"`
	// ContextTokens is the trigger's count of the session's context at
	// its last extraction request.
	ContextTokens int64 `json:"context_tokens,omitempty"`
	Extracting    bool  `json:"extracting,omitempty"`
	// From the session index.
	Name    string   `json:"name,omitempty"`
	Tags    []string `json:"tags,omitempty"`
	Summary string   `json:"summary,omitempty"`
}

// sessions lists the tenant's sessions, most recently active first; q
// filters by id, name, tag and summary.
func (c *Console) sessions(w http.ResponseWriter, r *http.Request) {
	_, tenant, ok := c.tenantOf(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	rows, err := c.listSessions(ctx, tenant)
	if err != nil {
		unavailable(w, err)
		return
	}
	if q := strings.ToLower(strings.TrimSpace(r.URL.Query().Get("q"))); q != "" {
		kept := rows[:0]
		for _, row := range rows {
			if strings.Contains(strings.ToLower(row.Session+" "+row.Name+" "+strings.Join(row.Tags, " ")+" "+row.Summary), q) {
				kept = append(kept, row)
			}
		}
		rows = kept
	}
	writeJSON(w, map[string]any{"tenant": tenant, "sessions": rows})
}

func (c *Console) listSessions(ctx context.Context, tenant string) ([]*sessionRow, error) {
	heads, err := c.heads(ctx, tenant)
	if err != nil {
		return nil, err
	}
	bySession := map[string]*sessionRow{}
	rows := make([]*sessionRow, 0, len(heads))
	for _, h := range heads {
		_, session, ok := events.SplitSessionSubject(h.Subject)
		if !ok {
			continue
		}
		row := &sessionRow{Session: session, LastSeq: h.Seq, LastActivity: h.Time}
		bySession[session] = row
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].LastActivity.After(rows[j].LastActivity) })
	if len(rows) > maxSessions {
		rows = rows[:maxSessions]
	}
	if err := c.countRecords(ctx, tenant, bySession); err != nil {
		return nil, err
	}
	c.joinBuckets(ctx, tenant, bySession)
	c.joinContext(ctx, tenant, bySession)
	return rows, nil
}

// joinContext adds each session's context size at its last extraction
// request: the newest extraction_requested notification of each session,
// in one batch read.
func (c *Console) joinContext(ctx context.Context, tenant string, rows map[string]*sessionRow) {
	subjects := make([]string, 0, len(rows))
	for session := range rows {
		subjects = append(subjects, events.EventsSubject(events.KindExtractionRequested, tenant, session))
	}
	last, err := transcript.LastOfEach(ctx, c.nc, events.StreamEvents, subjects, 0, len(subjects))
	if err != nil {
		return // the column stays empty
	}
	for _, m := range last {
		var req events.ExtractionRequested
		if row := rows[lastToken(m.Subject)]; row != nil && json.Unmarshal(m.Data, &req) == nil {
			row.ContextTokens = req.Counters.Tokens
		}
	}
}

func lastToken(subject string) string { return subject[strings.LastIndexByte(subject, '.')+1:] }

// heads is the newest record of each of the tenant's sessions: one
// multi_last read, or — for a tenant with more sessions than the server
// answers at once — the sessions met in a window at the end of the
// transcript, widened until it holds maxSessions of them or the whole
// stream.
func (c *Console) heads(ctx context.Context, tenant string) ([]transcript.Raw, error) {
	filter := events.TranscriptSubject(tenant, "*")
	heads, err := transcript.LastOfEach(ctx, c.nc, events.StreamTranscript, []string{filter}, 0, 1024)
	if !errors.Is(err, transcript.ErrTooManyResults) {
		return heads, err
	}
	st, err := c.js.Stream(ctx, events.StreamTranscript)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	last := info.State.LastSeq
	for window := uint64(20000); ; window *= 4 {
		from := uint64(1)
		if last > window {
			from = last - window
		}
		latest := map[string]transcript.Raw{}
		err := transcript.ScanRaw(ctx, c.nc, events.StreamTranscript, filter, from, last, 1024, func(m transcript.Raw) bool {
			m.Data = nil
			latest[m.Subject] = m
			return true
		})
		if err != nil {
			return nil, err
		}
		if len(latest) >= maxSessions || from == 1 {
			out := make([]transcript.Raw, 0, len(latest))
			for _, m := range latest {
				out = append(out, m)
			}
			return out, nil
		}
	}
}

// countRecords fills each session's record count from the stream's
// per-subject state.
func (c *Console) countRecords(ctx context.Context, tenant string, rows map[string]*sessionRow) error {
	st, err := c.js.Stream(ctx, events.StreamTranscript)
	if err != nil {
		return err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(events.TranscriptSubject(tenant, "*")))
	if err != nil {
		return err
	}
	for subj, n := range info.State.Subjects {
		if _, session, ok := events.SplitSessionSubject(subj); ok && rows[session] != nil {
			rows[session].Records = n
		}
	}
	return nil
}

// joinBuckets adds memory, index and extraction state: for each bucket one
// batch read of the listed sessions' keys. A bucket that cannot be read
// leaves its columns empty: the page still shows the transcript.
func (c *Console) joinBuckets(ctx context.Context, tenant string, rows map[string]*sessionRow) {
	c.eachValue(ctx, events.BucketMemory, tenant, rows, func(row *sessionRow, key string, m transcript.Raw) {
		if rec, err := store.DecodeMemory(key, m.Seq, m.Data); err == nil {
			row.MemoryRevision, row.LastSummarizedSeq, row.Extractions, row.MemoryUpdated = m.Seq, rec.LastSummarizedSeq, rec.Extractions, rec.UpdatedAt
		}
	})
	c.eachValue(ctx, events.BucketIndex, tenant, rows, func(row *sessionRow, _ string, m transcript.Raw) {
		var ix events.SessionIndex
		if json.Unmarshal(m.Data, &ix) == nil {
			row.Name, row.Tags, row.Summary = ix.Name, ix.Tags, ix.Summary
		}
	})
	c.eachValue(ctx, events.BucketStatus, tenant, rows, func(row *sessionRow, _ string, _ transcript.Raw) {
		row.Extracting = true
	})
}

// eachValue calls fn with the current value of each listed session's key
// (<tenant>.<session>) in bucket, read in one batch Direct Get of the
// bucket's stream; deleted, purged and expired keys are skipped.
func (c *Console) eachValue(ctx context.Context, bucket, tenant string, rows map[string]*sessionRow, fn func(row *sessionRow, key string, m transcript.Raw)) {
	prefix := "$KV." + bucket + "."
	subjects := make([]string, 0, len(rows))
	for session := range rows {
		subjects = append(subjects, prefix+events.MemoryKey(tenant, session))
	}
	last, err := transcript.LastOfEach(ctx, c.nc, "KV_"+bucket, subjects, 0, len(subjects))
	if err != nil {
		return
	}
	for _, m := range last {
		if m.Header.Get("KV-Operation") != "" || m.Header.Get("Nats-Marker-Reason") != "" {
			continue
		}
		key := strings.TrimPrefix(m.Subject, prefix)
		if _, session, ok := strings.Cut(key, "."); ok && rows[session] != nil {
			fn(rows[session], key, m)
		}
	}
}

// errNoSession answers 404.
var errNoSession = errors.New("no such session")
