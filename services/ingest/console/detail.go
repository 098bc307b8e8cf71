package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// Bounds of one session page.
const (
	maxPoints   = 600 // points of the token chart
	maxTimeline = 300 // newest lifecycle events
	// readBatch is the messages asked for per round trip of a bulk read
	// (a transcript, a listing): at most readBatch × the largest inline
	// record (512 KiB) in flight, so a read cannot flood the connection.
	readBatch = 32
	// maxPageBytes bounds the transcript bytes one page request reads: a
	// longer session is read over several requests (Partial; what was
	// read is kept, so the next request goes on from there).
	maxPageBytes = 64 << 20
	// maxPageTime is how long one page request reads the transcript before
	// it answers what it read (Partial) rather than run into its deadline.
	maxPageTime = 4 * time.Second
)

// sessionPage is everything the session page shows.
type sessionPage struct {
	Tenant  string               `json:"tenant"`
	Session string               `json:"session"`
	Records int                  `json:"records"`
	Memory  *memoryView          `json:"memory,omitempty"`
	History []revision           `json:"history"`
	Index   *events.SessionIndex `json:"index,omitempty"`
	// Series is the estimated context size after each record (downsampled);
	// Extractions and Compactions mark the chart.
	Series      []point    `json:"series"`
	Extractions []mark     `json:"extractions"`
	Compactions []mark     `json:"compactions"`
	Timeline    []happened `json:"timeline"`
	Extracting  bool       `json:"extracting"`
	// Partial: the transcript was read up to maxPageBytes or for
	// maxPageTime by this request; ask again to read on (Records counts
	// what was read).
	Partial bool `json:"partial,omitempty"`
	// FirstSeq and LastSeq are the stream sequences of the session's first
	// and newest record read: the chart spans them.
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// CoveredRecords is how many of the session's records the memory
	// covers (CoveredExact: counted exactly, else to within a bucket).
	CoveredRecords int  `json:"covered_records"`
	CoveredExact   bool `json:"covered_exact"`
	// Parent is the session Index names as parent, with its name;
	// Children are the sessions that name this one (by id, at most
	// maxChildren; MoreChildren counts the rest); References are the
	// sessions this one referenced with @@ (see related); ReferencedBy
	// are the sessions whose index entry records a reference to this one
	// (by id, at most maxChildren; MoreReferencedBy counts the rest).
	Parent           *related  `json:"parent,omitempty"`
	Children         []related `json:"children"`
	MoreChildren     int       `json:"more_children,omitempty"`
	References       []related `json:"references"`
	ReferencedBy     []related `json:"referenced_by"`
	MoreReferencedBy int       `json:"more_referenced_by,omitempty"`
	// IndexPartial: the tenant's session index was read for maxPageTime
	// by this request and Children and ReferencedBy may lack some; ask
	// again to read on.
	IndexPartial bool `json:"index_partial,omitempty"`
	read         *series
}

// memoryView is the memory record; Revision is the RECALL_MEMORY key's
// revision (a bucket-wide sequence, not a count of this session's
// extractions: that is Extractions).
type memoryView struct {
	events.MemoryRecord
	Revision uint64 `json:"revision"`
	// CostUSD prices Usage at Model's price (nil: no price known).
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// revision is one kept memory revision: Revision is the bucket's (KV)
// revision, Extractions the session's extraction count at it, Usage the
// LLM tokens spent on the session's memory up to it, Spent what its own
// extraction spent (nil when unknown), Model the model that wrote it.
type revision struct {
	Revision          uint64            `json:"revision"`
	Time              time.Time         `json:"time"`
	Notes             string            `json:"notes"`
	LastSummarizedSeq uint64            `json:"last_summarized_seq"`
	CoveredRecords    int               `json:"covered_records"`
	Extractions       int               `json:"extractions"`
	Usage             events.TokenUsage `json:"usage"`
	Model             string            `json:"model,omitempty"`
	Spent             *spent            `json:"spent,omitempty"`
}

// point is the estimated context after the record at stream sequence Seq,
// the session's Pos-th record.
type point struct {
	Seq    uint64 `json:"seq"`
	Pos    int    `json:"pos"`
	Tokens int64  `json:"tokens"`
}

// mark is an extraction (what it covers) or a compaction boundary.
type mark struct {
	Seq   uint64    `json:"seq"`
	Pos   int       `json:"pos"`
	Time  time.Time `json:"time"`
	Label string    `json:"label"`
}

// happened is one lifecycle notification of the session.
type happened struct {
	Seq  uint64          `json:"seq"`
	Time time.Time       `json:"time"`
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data,omitempty"`
}

func (c *Console) session(w http.ResponseWriter, r *http.Request) {
	tenant, session, ok := c.sessionOf(w, r)
	if !ok {
		return
	}
	release, ok := c.admit(w, r, tenant, "GET /console/api/tenants/{tenant}/sessions/{session}")
	if !ok {
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	var timing serverTiming
	page, err := c.sessionPage(ctx, tenant, session, &timing)
	w.Header().Set("Server-Timing", timing.String())
	switch {
	case errors.Is(err, errNoSession):
		fail(w, http.StatusNotFound, "tenant "+tenant+" has no session "+session)
	case err != nil:
		unavailable(w, err)
	default:
		writeJSON(w, page)
	}
}

func (c *Console) sessionPage(ctx context.Context, tenant, session string, timing *serverTiming) (*sessionPage, error) {
	p := &sessionPage{Tenant: tenant, Session: session, History: []revision{}, Extractions: []mark{}, Compactions: []mark{}, Timeline: []happened{}}
	if err := timing.measure("transcript", func() error { return c.readSeries(ctx, p) }); err != nil {
		return nil, err
	}
	if p.Records == 0 {
		return nil, errNoSession
	}
	if err := timing.measure("memory", func() error { return c.readMemory(ctx, p) }); err != nil {
		return nil, err
	}
	if err := timing.measure("events", func() error { return c.readTimeline(ctx, p) }); err != nil {
		return nil, err
	}
	c.priceHistory(p)
	key := events.MemoryKey(tenant, session)
	c.readIndex(ctx, p)
	_ = timing.measure("index", func() error { c.readLinks(ctx, p); return nil })
	p.References = append([]related{}, p.read.refs...)
	if kv, err := c.js.KeyValue(ctx, events.BucketStatus); err == nil {
		_, err := kv.Get(ctx, key)
		p.Extracting = err == nil
	}
	return p, nil
}

// readSeries reads the transcript: the estimated context after each
// record (reset to the reported size at each compaction boundary). Only
// the records after the cached series of the session are read, in batches
// of readBatch, at most maxPageBytes of them per request (p.Partial).
func (c *Console) readSeries(ctx context.Context, p *sessionPage) error {
	key := p.Tenant + "." + p.Session
	s := c.series.get(key)
	next := s.clone()
	read, soft := 0, time.Now().Add(maxPageTime)
	err := transcript.ScanRaw(ctx, c.nc, c.layout.Stream(p.Tenant, p.Session), c.layout.Subject(p.Tenant, p.Session), s.lastSeq+1, 0, readBatch,
		func(m transcript.Raw) bool {
			next.add(m)
			read += len(m.Data)
			p.Partial = read >= maxPageBytes || (next.records%readBatch == 0 && time.Now().After(soft))
			return !p.Partial
		})
	if next.lastSeq > s.lastSeq {
		c.series.put(key, next) // what was read counts, even when the read ended early
	}
	if err != nil {
		return fmt.Errorf("reading the transcript (%d records so far; reload to go on): %w", next.records, err)
	}
	p.Records, p.FirstSeq, p.LastSeq, p.read = next.records, next.firstSeq, next.lastSeq, next
	p.Series = next.points(maxPoints)
	p.Compactions = append(p.Compactions, next.compactions...)
	return nil
}

// readIndex reads the session's index entry and its parent: the one the
// index names, else the parent_session of its session.started (a session
// the indexer has not seen yet), with the parent's name when the index
// has it. A bucket that cannot be read leaves them out.
func (c *Console) readIndex(ctx context.Context, p *sessionPage) {
	kv, err := c.js.KeyValue(ctx, events.BucketIndex)
	if err == nil {
		p.Index = getIndex(ctx, kv, events.MemoryKey(p.Tenant, p.Session))
	}
	parent := p.read.parent
	if p.Index != nil && p.Index.ParentSession != "" {
		parent = p.Index.ParentSession
	}
	if parent == "" {
		return
	}
	p.Parent = &related{Session: parent}
	if err == nil {
		if ix := getIndex(ctx, kv, events.MemoryKey(p.Tenant, parent)); ix != nil {
			p.Parent.Name = ix.Name
		}
	}
}

// getIndex reads the session index entry of key (nil when there is none).
func getIndex(ctx context.Context, kv jetstream.KeyValue, key string) *events.SessionIndex {
	e, err := kv.Get(ctx, key)
	if err != nil {
		return nil
	}
	var ix events.SessionIndex
	if json.Unmarshal(e.Value(), &ix) != nil {
		return nil
	}
	return &ix
}

// lru keeps what was read of the sessions viewed last (their series and
// timelines), so that a page refreshed by a live update reads only what is
// new. Values are replaced, never changed, so a reader needs no lock after
// get.
type lru[T any] struct {
	mu    sync.Mutex
	max   int
	byKey map[string]*T
	order []string // least recently stored first
}

func (c *lru[T]) get(key string) *T {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v := c.byKey[key]; v != nil {
		return v
	}
	return new(T)
}

func (c *lru[T]) put(key string, v *T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[string]*T{}
	}
	if _, ok := c.byKey[key]; ok {
		c.order = slices.DeleteFunc(c.order, func(k string) bool { return k == key })
	}
	c.byKey[key] = v
	c.order = append(c.order, key)
	for len(c.order) > c.max {
		delete(c.byKey, c.order[0])
		c.order = c.order[1:]
	}
}

// readMemory reads the memory and its kept revisions; each revision is an
// extraction point on the chart.
func (c *Console) readMemory(ctx context.Context, p *sessionPage) error {
	kv, err := c.js.KeyValue(ctx, events.BucketMemory)
	if err != nil {
		return err
	}
	key := events.MemoryKey(p.Tenant, p.Session)
	hist, err := kv.History(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range hist {
		if e.Operation() != jetstream.KeyValuePut {
			continue
		}
		rec, err := store.DecodeMemory(key, e.Revision(), e.Value())
		if err != nil {
			continue // shown as missing; the compactor reports it
		}
		pos, _ := p.read.position(rec.LastSummarizedSeq)
		p.History = append(p.History, revision{Revision: e.Revision(), Time: e.Created(), Notes: rec.Notes, LastSummarizedSeq: rec.LastSummarizedSeq,
			Extractions: rec.Extractions, CoveredRecords: pos, Usage: rec.Usage, Model: rec.Model})
		p.Extractions = append(p.Extractions, mark{Seq: rec.LastSummarizedSeq, Pos: pos, Time: e.Created(), Label: "extraction " + itoa(int64(rec.Extractions))})
		p.Memory = &memoryView{MemoryRecord: rec, Revision: e.Revision()}
	}
	if p.Memory != nil {
		p.CoveredRecords, p.CoveredExact = p.read.position(p.Memory.LastSummarizedSeq)
	}
	return nil
}

// timeline is a session's newest lifecycle notifications so far.
type timeline struct {
	lastSeq uint64
	items   []happened
}

// readTimeline reads the session's newest lifecycle notifications (after
// the cached ones).
func (c *Console) readTimeline(ctx context.Context, p *sessionPage) error {
	key := p.Tenant + "." + p.Session
	had := c.timelines.get(key)
	tl := &timeline{lastSeq: had.lastSeq, items: slices.Clip(had.items)}
	subject := events.SubjectEventsRoot + ".*." + p.Tenant + "." + p.Session
	err := transcript.ScanRaw(ctx, c.nc, events.StreamEvents, subject, had.lastSeq+1, 0, readBatch, func(m transcript.Raw) bool {
		tl.items = append(tl.items, notification(m))
		tl.lastSeq = m.Seq
		if len(tl.items) > 2*maxTimeline {
			tl.items = slices.Clone(tl.items[len(tl.items)-maxTimeline:])
		}
		return true
	})
	if err != nil {
		return err
	}
	if len(tl.items) > maxTimeline {
		tl.items = slices.Clone(tl.items[len(tl.items)-maxTimeline:])
	}
	c.timelines.put(key, tl)
	p.Timeline = append(p.Timeline, tl.items...)
	return nil
}

// notification is a stored lifecycle event as the page shows it: its kind
// (the subject's second token) and its data.
func notification(m transcript.Raw) happened {
	h := happened{Seq: m.Seq, Time: m.Time, Kind: kindOf(m.Subject)}
	if json.Valid(m.Data) {
		h.Data = m.Data
	}
	return h
}

func kindOf(subject string) string {
	parts := strings.SplitN(subject, ".", 4)
	if len(parts) < 3 {
		return ""
	}
	return parts[2]
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// serverTiming is the Server-Timing header of a page: how long each read
// took, for the browser's developer tools and for the console's tests.
type serverTiming []string

func (t *serverTiming) measure(name string, f func() error) error {
	start := time.Now()
	err := f()
	*t = append(*t, name+";dur="+strconv.FormatFloat(float64(time.Since(start).Microseconds())/1000, 'f', 1, 64))
	return err
}

func (t serverTiming) String() string { return strings.Join(t, ", ") }
