package compactorsvc

import (
	"container/list"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/recallhq/recall/internal/transcript"
)

// tailCache keeps the decoded transcript records recent compactions read,
// per session, so that the next compaction of a session reads and decodes
// only the records stored since (one Direct Get that usually returns
// nothing) instead of its whole tail again. Stream records never change
// once stored, so an entry stays valid; a session's new records always have
// higher sequences than the cached ones. Entries are evicted least recently
// used first once the cached data passes the byte budget. Cached records are
// shared read-only between compactions. It is safe for concurrent use.
type tailCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	lru   *list.List // of *tailEntry, most recent first
	index map[string]*list.Element
}

// tailHits counts compactions whose tail came from the cache, in this
// process (TailCacheHits).
var tailHits atomic.Int64

// TailCacheHits is how many compactions in this process read their tail
// from the tail cache.
func TailCacheHits() int64 { return tailHits.Load() }

// tailEntry is a contiguous run of one session's records: every record of
// the session with a sequence from lowest up to the newest cached one.
type tailEntry struct {
	key    string
	recs   []transcript.Record
	lowest uint64
	bytes  int64
}

// newTailCache returns a cache of at most maxBytes of record data (0: no
// cache).
func newTailCache(maxBytes int64) *tailCache {
	return &tailCache{max: maxBytes, lru: list.New(), index: map[string]*list.Element{}}
}

// get returns the session's entry, if any.
func (t *tailCache) get(key string) (tailEntry, bool) {
	if t == nil || t.max <= 0 {
		return tailEntry{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	el, ok := t.index[key]
	if !ok {
		return tailEntry{}, false
	}
	t.lru.MoveToFront(el)
	return *el.Value.(*tailEntry), true
}

// put stores recs (every record of the session from lowest on, in order),
// keeping the older cached records below lowest.
func (t *tailCache) put(key string, lowest uint64, recs []transcript.Record) {
	if t == nil || t.max <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.index[key]; ok {
		old := el.Value.(*tailEntry)
		// Keep the older records only when they reach lowest: records
		// stored between the old entry's newest record and lowest were
		// never read, and a merged entry would claim they do not exist.
		if old.lowest < lowest && old.next() >= lowest {
			keep := old.recs[:sort.Search(len(old.recs), func(i int) bool { return old.recs[i].Seq >= lowest })]
			recs = append(append([]transcript.Record(nil), keep...), recs...)
			lowest = old.lowest
		}
		t.remove(el)
	}
	e := &tailEntry{key: key, recs: recs, lowest: lowest, bytes: recordBytes(recs)}
	if e.bytes > t.max {
		return
	}
	t.index[key] = t.lru.PushFront(e)
	t.size += e.bytes
	for t.size > t.max {
		t.remove(t.lru.Back())
	}
}

func (t *tailCache) remove(el *list.Element) {
	e := el.Value.(*tailEntry)
	t.lru.Remove(el)
	delete(t.index, e.key)
	t.size -= e.bytes
}

// recordBytes estimates the memory of decoded records: their data twice
// (raw and decoded) plus a fixed overhead.
func recordBytes(recs []transcript.Record) int64 {
	var n int64
	for i := range recs {
		n += 2*int64(len(recs[i].Event.Data())) + 512
	}
	return n
}

// from returns the entry's records with a sequence of at least seq, when
// the entry covers seq (lowest <= seq).
func (e tailEntry) from(seq uint64) ([]transcript.Record, bool) {
	if e.lowest > seq {
		return nil, false
	}
	i := sort.Search(len(e.recs), func(i int) bool { return e.recs[i].Seq >= seq })
	return e.recs[i:len(e.recs):len(e.recs)], true
}

// between returns the entry's records with lo <= seq <= hi, when the entry
// covers lo and hi: a record stored after the entry's newest one may lie
// in between, so a stretch reaching past it is read from the server.
func (e tailEntry) between(lo, hi uint64) ([]transcript.Record, bool) {
	recs, ok := e.from(lo)
	if !ok || hi >= e.next() {
		return nil, false
	}
	j := sort.Search(len(recs), func(i int) bool { return recs[i].Seq > hi })
	return recs[:j:j], true
}

// next is the first sequence after the entry's newest record.
func (e tailEntry) next() uint64 {
	if len(e.recs) == 0 {
		return e.lowest
	}
	return e.recs[len(e.recs)-1].Seq + 1
}
