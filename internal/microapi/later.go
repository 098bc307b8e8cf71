package microapi

import (
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/micro"
)

// Later keeps micro-style stats for the requests an endpoint answers after
// its handler returned (a model call, a wait, work under a concurrency
// bound). micro times and counts a request when the handler returns, so for
// those endpoints its own num_requests and processing_time describe the
// admission only and num_errors misses every later refusal. Later's numbers
// appear in $SRV.STATS as the endpoint's data, under "answered_later", when
// the service is created with StatsHandler set to Later.Stats.
type Later struct {
	mu sync.Mutex
	by map[string]*LaterStats
}

// LaterStats are one endpoint's requests answered later.
type LaterStats struct {
	NumRequests           uint64        `json:"num_requests"`
	NumErrors             uint64        `json:"num_errors"`
	LastError             string        `json:"last_error,omitempty"`
	InFlight              int64         `json:"in_flight"`
	ProcessingTime        time.Duration `json:"processing_time"`
	AverageProcessingTime time.Duration `json:"average_processing_time"`
}

// NewLater returns an empty Later.
func NewLater() *Later { return &Later{by: map[string]*LaterStats{}} }

// Begin records that endpoint took a request it will answer later; the
// returned function records the answer: code 0 for a success, otherwise the
// error code and description sent. Call it exactly once, before sending the
// answer, so that a client holding the answer finds it counted.
func (l *Later) Begin(endpoint string) (done func(code int, description string)) {
	start := time.Now()
	l.mu.Lock()
	s := l.stats(endpoint)
	s.InFlight++
	l.mu.Unlock()
	return func(code int, description string) {
		d := time.Since(start)
		l.mu.Lock()
		defer l.mu.Unlock()
		s.InFlight--
		s.NumRequests++
		s.ProcessingTime += d
		s.AverageProcessingTime = s.ProcessingTime / time.Duration(s.NumRequests)
		if code != 0 {
			s.NumErrors++
			s.LastError = strconv.Itoa(code) + ":" + description
		}
	}
}

// Done records the answer to a request Begin took, from an *Error (nil: a
// success).
func Done(done func(int, string), aerr *Error) {
	if aerr != nil {
		done(aerr.Code, aerr.Msg)
		return
	}
	done(0, "")
}

// Snapshot returns endpoint's stats so far.
func (l *Later) Snapshot(endpoint string) LaterStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return *l.stats(endpoint)
}

// Stats is a micro.Config StatsHandler: the endpoint's data in $SRV.STATS.
func (l *Later) Stats(e *micro.Endpoint) any {
	return struct {
		AnsweredLater LaterStats `json:"answered_later"`
	}{l.Snapshot(e.Name)}
}

func (l *Later) stats(endpoint string) *LaterStats {
	s := l.by[endpoint]
	if s == nil {
		s = &LaterStats{}
		l.by[endpoint] = s
	}
	return s
}
