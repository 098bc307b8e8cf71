package gatewaysvc

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// capturer queues capture jobs and publishes them with a fixed set of
// workers. enqueue never blocks; stop waits for the queued jobs.
type capturer struct {
	g      *Gateway
	queues [captureWorkers]chan *captureJob
	bytes  atomic.Int64 // request bytes queued
	// queued and handled count the jobs taken and finished (tests wait on
	// them).
	queued, handled atomic.Int64
	mu              sync.Mutex // guards closed and the start of the workers
	started         bool
	closed          bool
	wg              sync.WaitGroup
	sessions        *sessionStates
	chains          sessionChains
	failOpen        rateLog
	// retryFor and timeout bound one capture's publish retries and the
	// whole capture (captureRetryFor, captureTimeout; tests shorten them).
	retryFor, timeout time.Duration
	recordLimit       int // maxRecordBytes; tests lower it
	// life is the workers' context, cancelled when stop gives up waiting.
	life   context.Context
	cancel context.CancelFunc
}

func newCapturer(g *Gateway) *capturer {
	c := &capturer{g: g, sessions: newSessionStates(maxSessionStates), retryFor: captureRetryFor, timeout: captureTimeout, recordLimit: maxRecordBytes}
	c.cancel = func() {} // until start
	per := max(g.cfg.CaptureQueue/captureWorkers, 1)
	for i := range c.queues {
		c.queues[i] = make(chan *captureJob, per)
	}
	return c
}

// start starts the workers once. Their context carries ctx's values but
// not its end: stop ends it, after the queued jobs are published.
func (c *capturer) start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.closed {
		return
	}
	c.started = true
	c.life, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for i := range c.queues {
		q := c.queues[i]
		c.wg.Go(func() {
			for job := range q {
				c.run(job)
			}
		})
	}
}

// enqueue hands job to its session's worker, or drops it (counted) when
// the queue or the byte budget is full or capture stopped.
func (c *capturer) enqueue(job *captureJob) {
	n := int64(len(job.body))
	if c.bytes.Add(n) > captureQueueBytes {
		c.bytes.Add(-n)
		c.dropped("the capture queue is full (its bytes): this exchange is stored with the session's next request")
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.started {
		c.bytes.Add(-n)
		c.dropped("capture is not running: this exchange is stored with the session's next request")
		return
	}
	select {
	case c.queues[shardOf(job.header)] <- job:
		c.queued.Add(1)
	default:
		c.bytes.Add(-n)
		c.dropped("the capture queue is full (RECALL_GATEWAY_CAPTURE_QUEUE): this exchange is stored with the session's next request")
	}
}

func (c *capturer) dropped(msg string) {
	c.g.stats.CaptureFailed.Add(1)
	c.failOpen.log(c.g.log, msg, nil)
}

// stop closes the queues and waits, until ctx ends, for the workers to
// publish what they hold.
func (c *capturer) stop(ctx context.Context) {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		if c.started {
			for _, q := range c.queues {
				close(q)
			}
		}
	}
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		c.cancel() // the captures in flight end; their sessions' next requests store them
		<-done
	}
	c.cancel()
}

// run captures one job; its failure is counted and logged, never returned
// to anyone: the client has its answer already.
func (c *capturer) run(job *captureJob) {
	n0 := int64(len(job.body))
	defer func() { c.bytes.Add(-n0); c.handled.Add(1) }()
	rc := c.g.recall.Load()
	if rc == nil {
		c.g.stats.FailOpen.Add(1)
		c.dropped("Recall is not connected: this exchange is stored with the session's next request")
		return
	}
	ctx, cancel := context.WithTimeout(c.life, c.timeout)
	defer cancel()
	n, err := c.capture(ctx, rc, job)
	if err != nil {
		c.g.stats.CaptureFailed.Add(1)
		c.g.stats.FailOpen.Add(1)
		c.failOpen.log(c.g.log, "capture failed: the exchange is stored with the session's next request", err)
		return
	}
	if n > 0 {
		c.g.stats.Captured.Add(1)
	}
}

// captureTimeout bounds one capture (reading what a session stored, and
// publishing).
const captureTimeout = 30 * time.Second

// failOpenLogEvery is how often a failing capture is logged.
const failOpenLogEvery = time.Minute

// rateLog logs a warning at most once per failOpenLogEvery, saying how
// many were not logged in between.
type rateLog struct {
	mu     sync.Mutex
	last   time.Time
	missed int
}

func (r *rateLog) log(log *slog.Logger, msg string, err error) {
	r.mu.Lock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < failOpenLogEvery {
		r.missed++
		r.mu.Unlock()
		return
	}
	missed := r.missed
	r.last, r.missed = now, 0
	r.mu.Unlock()
	args := []any{"since_last_logged", missed}
	if err != nil {
		args = append(args, "err", err)
	}
	log.Warn("gateway fails open: "+msg, args...)
}
