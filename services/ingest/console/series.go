package console

import (
	"encoding/json"
	"slices"

	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// maxBuckets bounds a cached series: a session of millions of records
// keeps at most this many buckets (two points each), spread over its whole
// range of stream sequences.
const maxBuckets = 4 * maxPoints

// series is a session's context estimate so far, downsampled over its
// whole range: bucket i holds the records with stream sequence in
// [firstSeq + i·width, firstSeq + (i+1)·width), and keeps their lowest and
// highest point, so the start of a long session is never merged away and
// the peaks before a compaction survive. When a record falls past
// maxBuckets, width doubles and neighbouring buckets merge.
type series struct {
	records     int
	firstSeq    uint64
	lastSeq     uint64
	tokens      int64
	last        point
	width       uint64
	buckets     []bucket
	compactions []mark
	// refs are the sessions the session referenced (addRefs); parent is
	// the parent_session of its session.started.
	refs   []related
	parent string
}

// bucket is one stretch of a series: how many records it holds, and its
// lowest and highest point (n == 0: no message in it).
type bucket struct {
	records int
	n       int
	lo, hi  point
}

// clone returns a copy that add may change: cached series are read
// concurrently and never changed.
func (s *series) clone() *series {
	c := *s
	c.buckets = slices.Clone(s.buckets)
	c.compactions = slices.Clip(s.compactions)
	c.refs = slices.Clip(s.refs)
	return &c
}

// add accounts for one stored record. Binary-mode records are read from
// their ce-type header and data alone; others are decoded whole.
func (s *series) add(m transcript.Raw) {
	if s.records == 0 {
		s.firstSeq, s.width = m.Seq, 1
	}
	s.records++
	s.lastSeq = m.Seq
	b := s.bucketOf(m.Seq)
	b.records++
	msg, compacted, started := decodeRecord(m)
	if started != nil && started.ParentSession != "" {
		s.parent = started.ParentSession
	}
	switch {
	case msg != nil:
		s.tokens += memory.EstimateMessage(msg)
		s.refs = addRefs(s.refs, msg, m.Seq)
	case compacted != nil:
		s.tokens = compacted.PostTokens
		s.compactions = append(s.compactions, mark{Seq: m.Seq, Pos: s.records, Time: m.Time,
			Label: "compacted " + itoa(compacted.PreTokens) + " → " + itoa(compacted.PostTokens) + " tokens"})
	default:
		return
	}
	p := point{Seq: m.Seq, Pos: s.records, Tokens: s.tokens}
	s.last = p
	if b.n == 0 || p.Tokens < b.lo.Tokens {
		b.lo = p
	}
	if b.n == 0 || p.Tokens >= b.hi.Tokens {
		b.hi = p
	}
	b.n++
}

// decodeRecord decodes what the series reads of a record: a message, a
// compaction boundary or a session start (nil for the others).
func decodeRecord(m transcript.Raw) (*events.Message, *events.SessionCompacted, *events.SessionStarted) {
	switch typ := m.Header.Get("ce-type"); typ {
	case events.TypeMessage:
		msg, _ := events.DecodeMessage(m.Data)
		return msg, nil, nil
	case events.TypeSessionCompacted:
		c := new(events.SessionCompacted)
		if json.Unmarshal(m.Data, c) != nil {
			return nil, nil, nil
		}
		return nil, c, nil
	case events.TypeSessionStarted:
		st := new(events.SessionStarted)
		if json.Unmarshal(m.Data, st) != nil {
			return nil, nil, nil
		}
		return nil, nil, st
	case "":
		if rec, err := transcript.Decode(m.Header, m.Data); err == nil {
			return rec.Message, rec.Compacted, rec.Started
		}
	}
	return nil, nil, nil
}

// bucketOf is the bucket of seq (at or after firstSeq), coarsening the
// series as needed.
func (s *series) bucketOf(seq uint64) *bucket {
	i := (seq - s.firstSeq) / s.width
	for i >= maxBuckets {
		s.coarsen()
		i = (seq - s.firstSeq) / s.width
	}
	for uint64(len(s.buckets)) <= i {
		s.buckets = append(s.buckets, bucket{})
	}
	return &s.buckets[i]
}

// coarsen doubles the width, merging each pair of buckets into a new slice.
func (s *series) coarsen() {
	s.width *= 2
	out := make([]bucket, 0, len(s.buckets)/2+1)
	for i := 0; i < len(s.buckets); i += 2 {
		b := s.buckets[i]
		if i+1 < len(s.buckets) {
			b = merge(b, s.buckets[i+1])
		}
		out = append(out, b)
	}
	s.buckets = out
}

func merge(a, b bucket) bucket {
	switch {
	case a.n == 0:
		b.records += a.records
		return b
	case b.n == 0:
		a.records += b.records
		return a
	}
	out := bucket{records: a.records + b.records, n: a.n + b.n, lo: a.lo, hi: a.hi}
	if b.lo.Tokens < out.lo.Tokens {
		out.lo = b.lo
	}
	if b.hi.Tokens >= out.hi.Tokens {
		out.hi = b.hi
	}
	return out
}

// points is the series in at most n+1 points over its whole range: the
// lowest and highest of each of n/2 equal stretches, in order, then the
// newest point.
func (s *series) points(n int) []point {
	out := []point{}
	per := max(1, (len(s.buckets)+n/2-1)/max(1, n/2))
	for i := 0; i < len(s.buckets); i += per {
		g := bucket{}
		for _, b := range s.buckets[i:min(i+per, len(s.buckets))] {
			g = merge(g, b)
		}
		if g.n == 0 {
			continue
		}
		a, b := g.lo, g.hi
		if b.Seq < a.Seq {
			a, b = b, a
		}
		out = append(out, a)
		if b != a {
			out = append(out, b)
		}
	}
	if len(out) > 0 && out[len(out)-1] != s.last {
		out = append(out, s.last)
	}
	return out
}

// position is the number of the session's records up to seq (exact while
// each bucket is one sequence wide, else counted to seq's bucket), and
// whether it is exact.
func (s *series) position(seq uint64) (int, bool) {
	if s.records == 0 || seq < s.firstSeq {
		return 0, true
	}
	if seq >= s.lastSeq {
		return s.records, true
	}
	i := int((seq - s.firstSeq) / s.width)
	pos := 0
	for _, b := range s.buckets[:min(i+1, len(s.buckets))] {
		pos += b.records
	}
	return pos, s.width == 1
}
