// Package transcript reads a session's stored transcript from its shard
// stream (events.Layout) with batch Direct Get: no consumer is created and the
// stream is never scanned, so a read costs what it returns, however large the
// stream is.
//
// A record too large for one message is stored as a stub whose claim check
// (events.ExtBlob) names its body in events.BucketBlobs; Reader resolves
// stubs, so its callers see whole records. Decode alone does not: it
// returns the stub with its preview data and ClaimCheck set.
//
// Direct Get may be served by any replica and is not read-after-write
// consistent on clustered streams; callers that need a record they just
// stored should retry until it is visible.
package transcript

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// Record is one stored transcript event with its stream position.
type Record struct {
	Seq     uint64
	Subject string
	Time    time.Time
	Event   event.Event
	// Exactly one of these is set, according to Event.Type(); unknown types
	// leave all nil.
	Message    *events.Message
	Compacting *events.SessionCompacting
	Compacted  *events.SessionCompacted
	Ended      *events.SessionEnded
	Started    *events.SessionStarted
	// ClaimCheck is set on a stub whose body was not resolved (Decode, a
	// Reader from Stubs, or a body that aged out): Event's data and the
	// decoded fields above hold the preview.
	ClaimCheck *events.ClaimCheck
}

// Type is the record's CloudEvents type.
func (r *Record) Type() string { return r.Event.Type() }

// ErrNoResponders means the stream's Direct Get API did not answer (NATS is
// down or the stream has no AllowDirect).
var ErrNoResponders = errors.New("transcript: direct get had no responders")

// DefaultBatch is the number of records requested per round trip.
const DefaultBatch = 512

// Reader reads transcripts. It is safe for concurrent use.
type Reader struct {
	nc     *nats.Conn
	layout events.Layout
	batch  int
	stubs  bool // leave claim-checked records unresolved
	blobs  *atomic.Pointer[jetstream.ObjectStore]
}

// NewReader returns a reader over nc of the transcript stored in layout's
// shards. It resolves claim-checked records (see Resolve): one object fetch
// per stub, while the scan holds that record only.
func NewReader(nc *nats.Conn, layout events.Layout) *Reader {
	return &Reader{nc: nc, layout: layout, batch: DefaultBatch, blobs: new(atomic.Pointer[jetstream.ObjectStore])}
}

// Layout is the shard layout the reader reads.
func (r *Reader) Layout() events.Layout { return r.layout }

// Stubs returns a reader that leaves claim-checked records as stubs (their
// preview data, ClaimCheck set, its token estimate in ClaimCheck.Tokens):
// for callers that need only a record's metadata and must not fetch large
// bodies.
func (r *Reader) Stubs() *Reader {
	c := *r
	c.stubs = true
	return &c
}

// WithBatch returns a copy of r that asks for at most n records per round
// trip (n <= 0 keeps r's): a smaller batch bounds the bytes a read has in
// flight, so many large reads at once cannot make the connection a slow
// consumer.
func (r *Reader) WithBatch(n int) *Reader {
	c := *r
	if n > 0 {
		c.batch = n
	}
	return &c
}

type directGetRequest struct {
	Seq     uint64 `json:"seq"`
	NextFor string `json:"next_by_subj,omitempty"`
	Batch   int    `json:"batch"`
}

// Read returns the session's records with from <= seq <= to, in order; to == 0
// means up to the end of the stream. At most limit records are returned when
// limit > 0.
func (r *Reader) Read(ctx context.Context, tenant, session string, from, to uint64, limit int) ([]Record, error) {
	var out []Record
	err := r.Scan(ctx, tenant, session, from, to, func(rec Record) bool {
		out = append(out, rec)
		return limit <= 0 || len(out) < limit
	})
	return out, err
}

// Scan calls fn for each record of the session with from <= seq <= to (to == 0:
// to the end) in order, until fn returns false. Claim-checked records are
// resolved one at a time, before fn sees them (unless the reader is from
// Stubs); a failed resolution ends the scan with its error.
func (r *Reader) Scan(ctx context.Context, tenant, session string, from, to uint64, fn func(Record) bool) error {
	subject := r.layout.Subject(tenant, session)
	var decodeErr error
	err := ScanRaw(ctx, r.nc, r.layout.Stream(tenant, session), subject, from, to, r.batch, func(m Raw) bool {
		rec, err := Decode(m.Header, m.Data)
		if err != nil {
			decodeErr = fmt.Errorf("record %d of %s: %w", m.Seq, subject, err)
			return false
		}
		rec.Seq, rec.Subject, rec.Time = m.Seq, m.Subject, m.Time
		if rec.ClaimCheck != nil && !r.stubs {
			if decodeErr = r.Resolve(ctx, &rec); decodeErr != nil {
				return false
			}
		}
		return fn(rec)
	})
	if decodeErr != nil {
		return decodeErr
	}
	return err
}

// Raw is one stored message as Direct Get returns it.
type Raw struct {
	Seq     uint64
	Time    time.Time
	Subject string
	Header  nats.Header
	Data    []byte
}

// ScanRaw calls fn for each message of stream with from <= seq <= to (to ==
// 0: to the end), in order, until fn returns false. subject filters (it may
// hold wildcards); "" reads every subject. It reads with batch Direct Get,
// batch messages per round trip (DefaultBatch when <= 0), stepping over
// deleted sequences.
func ScanRaw(ctx context.Context, nc *nats.Conn, stream, subject string, from, to uint64, batch int, fn func(Raw) bool) error {
	if from == 0 {
		from = 1
	}
	if batch <= 0 {
		batch = DefaultBatch
	}
	for {
		n, last, more, err := batchGet(ctx, nc, stream, subject, from, to, batch, fn)
		if err != nil {
			return err
		}
		if n == 0 || !more || (to > 0 && last >= to) {
			return nil
		}
		from = last + 1
	}
}

// batchGet runs one batch request; it returns the number of messages passed
// to fn, the last sequence seen, and whether more may follow.
func batchGet(ctx context.Context, nc *nats.Conn, stream, subject string, from, to uint64, batch int, fn func(Raw) bool) (n int, last uint64, more bool, err error) {
	what := subject
	if what == "" {
		what = stream
	}
	req, _ := json.Marshal(directGetRequest{Seq: from, NextFor: subject, Batch: batch})
	inbox := nc.NewRespInbox()
	// A channel sized for one batch and its end-of-batch status: a
	// synchronous subscription would allocate the connection's default
	// 64k-slot channel for every batch.
	ch := make(chan *nats.Msg, batch+4)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return 0, 0, false, fmt.Errorf("reading transcript: %w", err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return 0, 0, false, fmt.Errorf("reading transcript: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	stopped := false
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) && n == 0 {
				return 0, 0, false, fmt.Errorf("reading transcript of %s: %w", what, ErrNoResponders)
			}
			return n, last, false, fmt.Errorf("reading transcript of %s: %w", what, ctx.Err())
		}
		if len(m.Data) == 0 && m.Header != nil && m.Header.Get("Status") != "" {
			switch m.Header.Get("Status") {
			case "204": // end of batch
				pending, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
				return n, last, pending > 0 && !stopped, nil
			case "404":
				return n, last, false, nil
			case "503":
				return n, last, false, fmt.Errorf("reading transcript of %s: %w", what, ErrNoResponders)
			default:
				return n, last, false, fmt.Errorf("reading transcript of %s: status %s %s", what, m.Header.Get("Status"), m.Header.Get("Description"))
			}
		}
		if stopped {
			continue // drain the rest of the batch up to EOB
		}
		seq, _ := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if to > 0 && seq > to {
			stopped = true
			continue
		}
		ts, _ := time.Parse(time.RFC3339Nano, m.Header.Get("Nats-Time-Stamp"))
		n++
		last = seq
		if !fn(Raw{Seq: seq, Time: ts, Subject: m.Header.Get("Nats-Subject"), Header: m.Header, Data: m.Data}) {
			stopped = true
		}
	}
}

// LastSeq returns the stream sequence of the session's newest record, or 0
// when the session has none.
func (r *Reader) LastSeq(ctx context.Context, tenant, session string) (uint64, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": r.layout.Subject(tenant, session)})
	m, err := r.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+r.layout.Stream(tenant, session), req)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return 0, ErrNoResponders
		}
		return 0, fmt.Errorf("reading transcript head: %w", err)
	}
	if st := m.Header.Get("Status"); st == "404" {
		return 0, nil
	} else if st != "" {
		return 0, fmt.Errorf("reading transcript head: status %s %s", st, m.Header.Get("Description"))
	}
	return strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
}

// Decode turns a stored message (headers and body) into a Record without its
// stream position. A claim-checked record decodes as its stub: ClaimCheck is
// set and the data is the preview (Reader.Resolve fetches the rest).
func Decode(h nats.Header, data []byte) (Record, error) {
	e, err := natsce.Decode(h, data)
	if err != nil {
		return Record{}, err
	}
	rec, err := decodeEvent(e, data)
	if err != nil {
		return Record{}, err
	}
	cc, ok, err := events.ClaimCheckOf(&e)
	if err != nil {
		return Record{}, fmt.Errorf("reading the claim check: %w", err)
	}
	if ok {
		rec.ClaimCheck = &cc
	}
	return rec, nil
}

// decodeEvent decodes e's data (data) by its type.
func decodeEvent(e event.Event, data []byte) (Record, error) {
	var err error
	rec := Record{Event: e}
	switch e.Type() {
	case events.TypeMessage:
		rec.Message, err = events.DecodeMessage(data)
	case events.TypeSessionCompacting:
		rec.Compacting = new(events.SessionCompacting)
		err = json.Unmarshal(data, rec.Compacting)
	case events.TypeSessionCompacted:
		rec.Compacted = new(events.SessionCompacted)
		err = json.Unmarshal(data, rec.Compacted)
	case events.TypeSessionEnded:
		rec.Ended = new(events.SessionEnded)
		if len(data) > 0 {
			err = json.Unmarshal(data, rec.Ended)
		}
	case events.TypeSessionStarted:
		rec.Started = new(events.SessionStarted)
		err = json.Unmarshal(data, rec.Started)
	}
	if err != nil {
		return Record{}, fmt.Errorf("decoding %s data: %w", e.Type(), err)
	}
	return rec, nil
}

// ErrTooManyResults is LastOfEach's answer when more subjects match than
// the server returns in one request (1,024 for nats-server 2.15): ask
// again from a later sequence.
var ErrTooManyResults = errors.New("transcript: too many subjects match for one multi_last request")

// LastOfEach returns the newest message of every subject of stream that
// matches one of filters (wildcards allowed) and whose newest message is at
// sequence from or later, at most limit of them, with one batch Direct Get
// ("multi_last"); the order is the server's.
func LastOfEach(ctx context.Context, nc *nats.Conn, stream string, filters []string, from uint64, limit int) ([]Raw, error) {
	if len(filters) == 0 {
		return nil, nil
	}
	filter := filters[0]
	req, _ := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
		Seq       uint64   `json:"seq,omitempty"`
		Batch     int      `json:"batch"`
	}{filters, from, limit})
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, limit+4)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", filter, err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filter, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	var out []Raw
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return out, fmt.Errorf("reading %s: %w", filter, ctx.Err())
		}
		if len(m.Data) == 0 && m.Header != nil && m.Header.Get("Status") != "" {
			switch m.Header.Get("Status") {
			case "204", "404":
				return out, nil
			case "413":
				return nil, fmt.Errorf("reading %s: %w", filter, ErrTooManyResults)
			case "503":
				return out, fmt.Errorf("reading %s: %w", filter, ErrNoResponders)
			default:
				return out, fmt.Errorf("reading %s: status %s %s", filter, m.Header.Get("Status"), m.Header.Get("Description"))
			}
		}
		seq, _ := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		ts, _ := time.Parse(time.RFC3339Nano, m.Header.Get("Nats-Time-Stamp"))
		out = append(out, Raw{Seq: seq, Time: ts, Subject: m.Header.Get("Nats-Subject"), Header: m.Header, Data: m.Data})
	}
}
