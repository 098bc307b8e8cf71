package gatewaysvc

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/gateway/wire"
)

// EventSource is the CloudEvents source of the records the gateway
// captures.
const EventSource = "/recall/gateway"

// capture stores the job's records that its session does not hold yet and
// returns how many it published.
func (c *capturer) capture(ctx context.Context, rc *recall, job *captureJob) (int, error) {
	cl, err := c.clientOf(rc, job.tenant)
	if err != nil {
		return 0, err
	}
	var got *captured
	var state *sessionState
	stateOf := func(s Session) *sessionState {
		state = c.sessions.get(job.tenant, s.ID)
		return state
	}
	if job.api == wire.ReplyAnthropic {
		got, err = c.decodeAnthropic(job, stateOf)
	} else if got, err = c.decodeOpenAI(job); err == nil {
		stateOf(got.session)
	}
	job.body = nil // the records hold what is kept; the body may go
	if err != nil {
		return 0, fmt.Errorf("decoding the request: %w", err)
	}
	state.mu.Lock()
	defer state.mu.Unlock()
	if !state.loaded {
		if err := state.load(ctx, rc.nc, cl, job.tenant, got.session.ID); err != nil {
			return 0, err
		}
	}
	evs := make([]event.Event, 0, 2)
	for i := range got.records {
		m := &got.records[i]
		if state.has(m.UUID) {
			continue
		}
		if got.agent != "" {
			m.QuerySource, m.AgentID = events.QuerySubagent, got.agent
		}
		e, err := fitRecord(got.session.ID, m, c.recordLimit)
		if err != nil {
			return 0, err
		}
		evs = append(evs, e)
	}
	if len(evs) == 0 {
		return 0, nil
	}
	res, err := cl.PublishBatch(ctx, evs)
	for i := range res {
		switch {
		case res[i].Err == nil:
			state.add(evs[i].ID())
		case errors.Is(res[i].Err, events.ErrInvalidEvent):
			// Refused for good: resending it with every request would only
			// fail again. Logged (rate-limited) below with err.
			state.add(evs[i].ID())
		}
	}
	if err != nil {
		return 0, fmt.Errorf("publishing %d records of session %s: %w", len(evs), got.session.ID, err)
	}
	return len(evs), nil
}

// recordEvent is the transcript event of m in session.
func recordEvent(session string, m *events.Message) (event.Event, error) {
	e := event.New()
	e.SetID(m.UUID)
	e.SetSource(EventSource)
	e.SetType(events.TypeMessage)
	e.SetSubject(session)
	e.SetTime(time.Now())
	if err := e.SetData(event.ApplicationJSON, m); err != nil {
		return e, fmt.Errorf("encoding record %s: %w", m.UUID, err)
	}
	return e, nil
}

// clientOf is the tenant's publisher (one per tenant and connection).
func (c *capturer) clientOf(rc *recall, tenant string) (*client.Client, error) {
	if v, ok := rc.clients.Load(tenant); ok {
		return v.(*client.Client), nil
	}
	cl, err := client.New(rc.js, tenant, client.Ordered(), client.RetryFor(c.retryFor), client.AttemptTimeout(min(client.DefaultAttemptTimeout, c.retryFor)))
	if err != nil {
		return nil, err
	}
	v, _ := rc.clients.LoadOrStore(tenant, cl)
	return v.(*client.Client), nil
}

// captureRetryFor bounds the retries of one capture's publish.
const captureRetryFor = 10 * time.Second

// maxSessionStates bounds the sessions whose stored ids are kept; the
// least recently used is forgotten first (and read again from the
// transcript when it comes back).
const maxSessionStates = 4096

// sessionState is what capture knows of one session: the ids of its
// stored records (read from the transcript the first time this process
// captures the session, then kept up to date), and whether its main
// thread sends tools. mu serializes the session's captures.
type sessionState struct {
	mu       sync.Mutex
	loaded   bool
	stored   map[[16]byte]struct{}
	hasTools atomic.Bool
}

func idKey(id string) [16]byte {
	var k [16]byte
	if len(id) == 34 && strings.HasPrefix(id, "gw") {
		if _, err := hex.Decode(k[:], []byte(id[2:])); err == nil {
			return k
		}
	}
	sum := sha256.Sum256([]byte(id))
	copy(k[:], sum[:16])
	return k
}

func (s *sessionState) has(id string) bool { _, ok := s.stored[idKey(id)]; return ok }
func (s *sessionState) add(id string)      { s.stored[idKey(id)] = struct{}{} }

// load reads the ids of the session's stored records (their CloudEvents
// ids, from the message headers: no record is decoded).
func (s *sessionState) load(ctx context.Context, nc *nats.Conn, cl *client.Client, tenant, session string) error {
	layout, err := cl.Layout(ctx)
	if err != nil {
		return err
	}
	stored := map[[16]byte]struct{}{}
	err = transcript.ScanRaw(ctx, nc, layout.Stream(tenant, session), layout.Subject(tenant, session), 0, 0, 0, func(m transcript.Raw) bool {
		if id := headerValue(m.Header, "ce-id"); id != "" {
			stored[idKey(id)] = struct{}{}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("reading the records session %s stored: %w", session, err)
	}
	s.stored, s.loaded = stored, true
	return nil
}

func headerValue(h nats.Header, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// sessionStates is a bounded map of session states, least recently used
// forgotten first. Safe for concurrent use.
type sessionStates struct {
	mu  sync.Mutex
	max int
	m   map[string]*list.Element
	lru *list.List // of *stateEntry, most recent at front
}

type stateEntry struct {
	key   string
	state *sessionState
}

func newSessionStates(n int) *sessionStates {
	return &sessionStates{max: n, m: map[string]*list.Element{}, lru: list.New()}
}

func (s *sessionStates) get(tenant, session string) *sessionState {
	key := tenant + "\x00" + session
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[key]; ok {
		s.lru.MoveToFront(e)
		return e.Value.(*stateEntry).state
	}
	st := &sessionState{}
	s.m[key] = s.lru.PushFront(&stateEntry{key, st})
	if s.lru.Len() > s.max {
		old := s.lru.Remove(s.lru.Back()).(*stateEntry)
		delete(s.m, old.key)
	}
	return st
}
