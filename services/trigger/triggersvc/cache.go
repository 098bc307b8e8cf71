package triggersvc

import (
	"strings"
	"unsafe"

	"github.com/recallhq/recall/pkg/memory"
)

// session is one session's state in memory, linked into the LRU ring.
type session struct {
	key        string // "<tenant>.<session>"
	tenantLen  int
	st         memory.TriggerState
	prev, next *session
	lastActive int64  // local clock, Unix ns
	trace      string // traceparent of the pending response's last record
	dropped    bool
	sinceSnap  int32  // records applied since the last snapshot (snapshot.go)
	pubEpoch   uint64 // emitter epoch of the session's last publication
}

func (s *session) tenant() string  { return s.key[:s.tenantLen] }
func (s *session) session() string { return s.key[s.tenantLen+1:] }

// sessionOverhead approximates a cache entry beyond the state: the session
// struct without its state, and a map slot (key header, pointer, hash
// bucket share).
const sessionOverhead = int(unsafe.Sizeof(session{})-unsafe.Sizeof(memory.TriggerState{})) + 48

// sessionCache holds a lane's sessions under an LRU bound. It is owned by
// one lane goroutine and is not safe for concurrent use.
type sessionCache struct {
	max      int
	sessions map[string]*session
	lru      session // sentinel of the LRU ring: lru.next is the most recent
	// evicted remembers sessions evicted while fromStart holds, so that
	// they are rebuilt rather than taken for new ones. It is bounded by
	// max: when it would grow past it, it is cleared and fromStart turns
	// off (every unknown session is then rebuilt — one Direct Get for a new
	// one), so memory stays bounded whatever the churn.
	evicted map[uint64]struct{}
	// fromStart: no record before the lane's position exists, so a session
	// never seen is new and needs no rebuild.
	fromStart bool
	stats     *counters
}

func newSessionCache(max int, stats *counters) *sessionCache {
	c := &sessionCache{max: max, sessions: map[string]*session{}, evicted: map[uint64]struct{}{}, stats: stats}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// get returns the session of key if it is in memory, marking it used.
func (c *sessionCache) get(key string, now int64) *session {
	s := c.sessions[key]
	if s != nil {
		s.lastActive = now
		c.moveFront(s)
	}
	return s
}

// needsRebuild reports whether a session of key that is not in memory may
// have records before seq.
func (c *sessionCache) needsRebuild(key string, seq uint64) bool {
	if seq <= 1 {
		return false
	}
	_, wasEvicted := c.evicted[hashKey(key)]
	return wasEvicted || !c.fromStart
}

// add inserts s (not in memory) as the most recent session and evicts the
// least recently used ones beyond max.
func (c *sessionCache) add(s *session) {
	delete(c.evicted, hashKey(s.key))
	c.sessions[s.key] = s
	c.moveFront(s)
	c.stats.sessions.Add(1)
	c.stats.bytes.Add(int64(sessionOverhead + len(s.key) + s.st.Size()))
	if len(c.sessions) > c.max {
		c.evictLRU()
	}
}

// newSession is an empty session of key (cloned: key may alias a message).
func newSession(key string, dot int, now int64) *session {
	return &session{key: strings.Clone(key), tenantLen: dot, lastActive: now}
}

func (c *sessionCache) moveFront(s *session) {
	if s.prev != nil {
		s.prev.next, s.next.prev = s.next, s.prev
	}
	s.next, s.prev = c.lru.next, &c.lru
	c.lru.next.prev = s
	c.lru.next = s
}

// evict removes s from memory; its next record rebuilds it.
func (c *sessionCache) evict(s *session) {
	if c.sessions[s.key] != s {
		return
	}
	delete(c.sessions, s.key)
	s.prev.next, s.next.prev = s.next, s.prev
	s.prev, s.next = nil, nil
	s.dropped = true
	if c.fromStart {
		if len(c.evicted) >= c.max {
			clear(c.evicted)
			c.fromStart = false
		} else {
			c.evicted[hashKey(s.key)] = struct{}{}
		}
	}
	c.stats.evictions.Add(1)
	c.stats.sessions.Add(-1)
	c.stats.bytes.Add(-int64(sessionOverhead + len(s.key) + s.st.Size()))
}

// evictLRU evicts least recently used sessions without a pending response
// until the cache fits.
func (c *sessionCache) evictLRU() {
	for s := c.lru.prev; s != &c.lru && len(c.sessions) > c.max; {
		prev := s.prev
		if _, _, pending := s.st.Pending(); !pending {
			c.evict(s)
		}
		s = prev
	}
}

// evictIdle evicts sessions not used since limit (without a pending
// response), oldest first.
func (c *sessionCache) evictIdle(limit int64) {
	for s := c.lru.prev; s != &c.lru && s.lastActive < limit; {
		prev := s.prev
		if _, _, pending := s.st.Pending(); !pending {
			c.evict(s)
		}
		s = prev
	}
}

// dropAll forgets every session (they are rebuilt from the transcript).
func (c *sessionCache) dropAll() {
	for _, s := range c.sessions {
		s.dropped = true
		c.stats.sessions.Add(-1)
		c.stats.bytes.Add(-int64(sessionOverhead + len(s.key) + s.st.Size()))
	}
	c.sessions = map[string]*session{}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	c.fromStart = false
	clear(c.evicted)
}

// len is the number of sessions in memory.
func (c *sessionCache) len() int { return len(c.sessions) }
