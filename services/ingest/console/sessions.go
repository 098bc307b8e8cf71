package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// Bounds of the sessions list: a page holds at most maxSessions rows
// (defaultSessions unless ?limit= asks otherwise), and one request looks
// at most maxScan sessions for a ?q= search (then it answers what it found
// with a cursor to go on).
const (
	maxSessions     = 500
	defaultSessions = 200
	maxScan         = 5000
)

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
	// Match is the memory's text around a search's match, when it
	// matched there.
	Match string `json:"match,omitempty"`
	notes string
}

// sessionsPage is one page of the sessions list.
type sessionsPage struct {
	Tenant   string        `json:"tenant"`
	Sessions []*sessionRow `json:"sessions"`
	// Total is the tenant's number of sessions.
	Total int `json:"total"`
	// NextCursor, when set, asks for the next page (?cursor=).
	NextCursor string `json:"next_cursor,omitempty"`
}

// sessions lists a page of the tenant's sessions: pages follow the
// session ids (?cursor= the previous page's next_cursor, ?limit= rows,
// at most maxSessions); within a page the most recently active come
// first. ?q= filters by id, name, tag, summary and memory.
func (c *Console) sessions(w http.ResponseWriter, r *http.Request) {
	_, tenant, ok := c.tenantOf(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit := defaultSessions
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			fail(w, http.StatusBadRequest, "limit must be a positive integer")
			return
		}
		limit = min(n, maxSessions)
	}
	release, ok := c.admit(w, r, tenant, "GET /console/api/tenants/{tenant}/sessions")
	if !ok {
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	page, err := c.listSessions(ctx, tenant, strings.ToLower(strings.TrimSpace(q.Get("q"))), q.Get("cursor"), limit)
	if err != nil {
		unavailable(w, err)
		return
	}
	writeJSON(w, page)
}

// listSessions reads one page: the tenant's session ids after cursor from
// the shard streams' per-subject state (no message is read; the ids of
// every shard are merged, then ordered, so pages follow the session ids
// whatever shard holds them), then the page's heads, memory, index and
// context in batches of readBatch.
func (c *Console) listSessions(ctx context.Context, tenant, q, cursor string, limit int) (*sessionsPage, error) {
	counts, err := c.recordCounts(ctx, tenant)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(counts))
	for id := range counts {
		if id > cursor {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	page := &sessionsPage{Tenant: tenant, Sessions: []*sessionRow{}, Total: len(counts)}
	scanned := 0
	for len(ids) > 0 && len(page.Sessions) < limit && scanned < maxScan {
		chunk := ids[:min(len(ids), limit-len(page.Sessions), maxScan-scanned)]
		ids = ids[len(chunk):]
		scanned += len(chunk)
		rows := make(map[string]*sessionRow, len(chunk))
		for _, id := range chunk {
			rows[id] = &sessionRow{Session: id, Records: counts[id]}
		}
		c.joinBuckets(ctx, tenant, rows)
		for _, id := range chunk {
			if row := rows[id]; matches(row, q) {
				page.Sessions = append(page.Sessions, row)
			}
		}
		if len(ids) > 0 {
			page.NextCursor = chunk[len(chunk)-1]
		} else {
			page.NextCursor = ""
		}
	}
	if err := c.joinHeads(ctx, tenant, page.Sessions); err != nil {
		return nil, err
	}
	sort.SliceStable(page.Sessions, func(i, j int) bool { return page.Sessions[i].LastActivity.After(page.Sessions[j].LastActivity) })
	return page, nil
}

// matches reports whether row matches the search q (lower case): its id,
// name, tags, summary or memory; a match in the memory only is quoted in
// row.Match.
func matches(row *sessionRow, q string) bool {
	if q == "" || strings.Contains(strings.ToLower(row.Session+" "+row.Name+" "+strings.Join(row.Tags, " ")+" "+row.Summary), q) {
		return true
	}
	notes := strings.ToLower(row.notes) // byte offsets kept for ASCII; others are cut on rune boundaries below
	i := strings.Index(notes, q)
	if i < 0 || len(notes) != len(row.notes) {
		return i >= 0
	}
	from, to := max(0, i-60), min(len(row.notes), i+len(q)+60)
	for from > 0 && !utf8.RuneStart(row.notes[from]) {
		from--
	}
	for to < len(row.notes) && !utf8.RuneStart(row.notes[to]) {
		to++
	}
	row.Match = strings.Join(strings.Fields(row.notes[from:to]), " ")
	return true
}

// joinHeads adds each row's newest record (sequence in its shard stream,
// time) and the context size at its last extraction request: one batch
// read per shard stream that holds listed sessions.
func (c *Console) joinHeads(ctx context.Context, tenant string, list []*sessionRow) error {
	rows := make(map[string]*sessionRow, len(list))
	byStream := map[string][]string{}
	for _, row := range list {
		rows[row.Session] = row
		stream := c.layout.Stream(tenant, row.Session)
		byStream[stream] = append(byStream[stream], c.layout.Subject(tenant, row.Session))
	}
	for _, stream := range c.layout.Streams() {
		if len(byStream[stream]) == 0 {
			continue
		}
		err := c.lastOfEach(ctx, stream, byStream[stream], func(m transcript.Raw) {
			if _, _, session, ok := events.ParseTranscriptSubject(m.Subject); ok && rows[session] != nil {
				rows[session].LastSeq, rows[session].LastActivity = m.Seq, m.Time
			}
		})
		if err != nil {
			return err
		}
	}
	c.joinContext(ctx, tenant, rows)
	return nil
}

// lastOfEach calls fn with the newest message of each of subjects in
// stream, asking for readBatch subjects per round trip (a head may be a
// large record). fn must not keep m.Data.
func (c *Console) lastOfEach(ctx context.Context, stream string, subjects []string, fn func(m transcript.Raw)) error {
	for len(subjects) > 0 {
		chunk := subjects[:min(len(subjects), readBatch)]
		subjects = subjects[len(chunk):]
		last, err := transcript.LastOfEach(ctx, c.nc, stream, chunk, 0, len(chunk))
		if err != nil {
			return err
		}
		for _, m := range last {
			fn(m)
		}
	}
	return nil
}

// joinContext adds each session's context size at its last extraction
// request: the newest extraction_requested notification of each session,
// in one batch read.
func (c *Console) joinContext(ctx context.Context, tenant string, rows map[string]*sessionRow) {
	subjects := make([]string, 0, len(rows))
	for session := range rows {
		subjects = append(subjects, events.EventsSubject(events.KindExtractionRequested, tenant, session))
	}
	// A failed read leaves the column empty.
	_ = c.lastOfEach(ctx, events.StreamEvents, subjects, func(m transcript.Raw) {
		var req events.ExtractionRequested
		if row := rows[lastToken(m.Subject)]; row != nil && json.Unmarshal(m.Data, &req) == nil {
			row.ContextTokens = req.Counters.Tokens
		}
	})
}

func lastToken(subject string) string { return subject[strings.LastIndexByte(subject, '.')+1:] }

// recordCounts returns the record count of each of the tenant's sessions,
// from every shard stream's per-subject state.
func (c *Console) recordCounts(ctx context.Context, tenant string) (map[string]uint64, error) {
	counts := map[string]uint64{}
	err := c.subjectCounts(ctx, events.TenantTranscripts(tenant), func(_, session string, n uint64) {
		counts[session] += n
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// subjectCounts calls fn with the tenant, session and record count of
// every transcript subject matching filter, read from the per-subject
// state of every shard stream in turn (no message is read; the client
// pages through each stream's state). A session lives in one shard, so fn
// sees each session once.
func (c *Console) subjectCounts(ctx context.Context, filter string, fn func(tenant, session string, n uint64)) error {
	for _, name := range c.layout.Streams() {
		st, err := c.js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("reading stream %s: %w", name, err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return fmt.Errorf("reading the sessions of stream %s: %w", name, err)
		}
		for subj, n := range info.State.Subjects {
			if _, tenant, session, ok := events.ParseTranscriptSubject(subj); ok {
				fn(tenant, session, n)
			}
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
			row.notes = rec.Notes
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
// bucket's stream (readBatch keys per round trip); deleted, purged and expired keys are skipped.
func (c *Console) eachValue(ctx context.Context, bucket, tenant string, rows map[string]*sessionRow, fn func(row *sessionRow, key string, m transcript.Raw)) {
	prefix := "$KV." + bucket + "."
	subjects := make([]string, 0, len(rows))
	for session := range rows {
		subjects = append(subjects, prefix+events.MemoryKey(tenant, session))
	}
	// A failed read leaves the bucket's columns empty.
	_ = c.lastOfEach(ctx, "KV_"+bucket, subjects, func(m transcript.Raw) {
		if m.Header.Get("KV-Operation") != "" || m.Header.Get("Nats-Marker-Reason") != "" {
			return
		}
		key := strings.TrimPrefix(m.Subject, prefix)
		if _, session, ok := strings.Cut(key, "."); ok && rows[session] != nil {
			fn(rows[session], key, m)
		}
	})
}

// errNoSession answers 404.
var errNoSession = errors.New("no such session")
