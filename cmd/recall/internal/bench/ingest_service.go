package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

const (
	// httpBatch is the number of events per HTTP batch request.
	httpBatch = 100
	// httpSenders is the number of concurrent HTTP clients.
	httpSenders = 4
)

// startIngest runs the ingest service with its HTTP edge on a free loopback
// port and returns it with that address.
func startIngest(ctx context.Context, e *env) (*service, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	// One tenant alone measures the service's throughput: its share of the
	// NATS endpoint (RECALL_INGEST_TENANT_IN_FLIGHT, 256 by default, 429
	// beyond) is raised to the window the bench keeps in flight.
	cfg := ingestsvc.Config{NATS: natsconn.Config{URL: e.url}, Config: e.provisionConfig(), HTTPAddr: addr, TenantInFlight: endpointWindow}
	svc, err := startService(ctx, "ingest", func(ctx context.Context) error {
		return ingestsvc.Run(ctx, cfg, e.log.With("service", "ingest"))
	}, httpReady(addr))
	return svc, addr, err
}

// ingestService measures the ingest service's HTTP edge (batches of
// httpBatch structured CloudEvents over loopback).
func ingestService(ctx context.Context, e *env, c *corpus) error {
	r := &e.res.Ingest
	svc, addr, err := startIngest(ctx, e)
	if reason, ok := isSkip(err); ok {
		r.HTTPSkipped, r.NATSEndpointSkipped = reason, reason
		e.progress("   ingest service: %s", reason)
		return nil
	}
	if err != nil {
		return err
	}
	defer svc.stop()

	bodies := make([][]byte, 0, len(c.events)/httpBatch+1)
	for i := 0; i < len(c.events); i += httpBatch {
		b, err := json.Marshal(c.events[i:min(i+httpBatch, len(c.events))])
		if err != nil {
			return fmt.Errorf("encoding a batch: %w", err)
		}
		bodies = append(bodies, b)
	}
	d, err := httpPost(ctx, "http://"+addr+"/v1/events", bodies)
	if err != nil {
		r.HTTPSkipped = "failed: " + err.Error()
		e.progress("   ingest http: %v", err)
	} else {
		r.HTTPBatchEventsPerS = f64(round1(rate(len(c.events), d)))
		r.RatioHTTPVsRaw = ratio(r.HTTPBatchEventsPerS, e.res.Raw.JSPublishMsgsPerS)
		e.progress("   ingest http batch %d: %.0f events/s (%.2f x raw publish)", httpBatch, *r.HTTPBatchEventsPerS, deref(r.RatioHTTPVsRaw))
	}
	d, err = endpointPublish(ctx, e, c.msgs, endpointWindow)
	if err != nil {
		r.NATSEndpointSkipped = "failed: " + err.Error()
		e.progress("   ingest nats endpoint: %v", err)
	} else {
		r.NATSEndpointEventsPerS = f64(round1(rate(len(c.msgs), d)))
		r.RatioNATSEndpointVsRaw = ratio(r.NATSEndpointEventsPerS, e.res.Raw.JSPublishMsgsPerS)
		e.progress("   ingest nats endpoint: %.0f events/s (%.2f x raw publish)", *r.NATSEndpointEventsPerS, deref(r.RatioNATSEndpointVsRaw))
	}
	batches, err := sessionBatches(c.events)
	if err != nil {
		return err
	}
	// 32 batches in flight hold 3,200 events, and stay well inside the
	// endpoint subscription's pending limit (64 MB).
	if d, err = endpointPublish(ctx, e, batches, 32); err != nil {
		e.progress("   ingest nats endpoint, batches: %v", err)
	} else {
		r.NATSEndpointBatchEventsPerS = f64(round1(rate(len(c.events), d)))
		r.RatioNATSEndpointBatchVsRaw = ratio(r.NATSEndpointBatchEventsPerS, e.res.Raw.JSPublishMsgsPerS)
		e.progress("   ingest nats endpoint, batches of %d: %.0f events/s (%.2f x raw publish)", httpBatch, *r.NATSEndpointBatchEventsPerS, deref(r.RatioNATSEndpointBatchVsRaw))
	}
	return nil
}

// sessionBatches groups events by session, in order, into structured
// batches of at most httpBatch events, as requests for the NATS ingest
// endpoint (recall.api.ingest.<tenant>.<session>).
func sessionBatches(evs []event.Event) ([]*nats.Msg, error) {
	var order []string
	bySession := map[string][]event.Event{}
	for _, ev := range evs {
		if _, ok := bySession[ev.Subject()]; !ok {
			order = append(order, ev.Subject())
		}
		bySession[ev.Subject()] = append(bySession[ev.Subject()], ev)
	}
	var out []*nats.Msg
	for _, session := range order {
		all := bySession[session]
		for i := 0; i < len(all); i += httpBatch {
			b, err := json.Marshal(all[i:min(i+httpBatch, len(all))])
			if err != nil {
				return nil, fmt.Errorf("encoding a batch: %w", err)
			}
			out = append(out, &nats.Msg{Subject: events.APISubject(events.VerbIngest, benchTenant, session), Header: nats.Header{}, Data: b})
		}
	}
	return out, nil
}

// endpointWindow is the number of ingest endpoint requests in flight.
const endpointWindow = 512

// endpointPublish sends every message as one request to the ingest
// service's NATS endpoint (recall.api.ingest.<tenant>.<session>),
// pipelined with inFlight requests in flight, and waits for every reply. Any error reply fails the run.
func endpointPublish(ctx context.Context, e *env, msgs []*nats.Msg, inFlight int) (time.Duration, error) {
	inbox := events.InboxPrefix(benchTenant) + "." + nats.NewInbox() // the reply space the service answers in
	window := make(chan struct{}, inFlight)
	var (
		mu    sync.Mutex
		got   int
		first error
	)
	done := make(chan struct{})
	sub, err := e.nc.Subscribe(inbox+".*", func(m *nats.Msg) {
		if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
			mu.Lock()
			if first == nil {
				first = fmt.Errorf("ingest endpoint replied %s: %s: %.300s", code, m.Header.Get("Nats-Service-Error"), m.Data)
			}
			mu.Unlock()
		}
		<-window
		mu.Lock()
		got++
		if got == len(msgs) {
			close(done)
		}
		mu.Unlock()
	})
	if err != nil {
		return 0, err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	start := time.Now()
	for i, m := range msgs {
		select {
		case window <- struct{}{}:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		tenant, session, _ := events.SplitSessionSubject(m.Subject)
		req := &nats.Msg{Subject: events.APISubject(events.VerbIngest, tenant, session), Reply: inbox + "." + strconv.Itoa(i), Header: m.Header, Data: m.Data}
		if err := e.nc.PublishMsg(req); err != nil {
			return 0, fmt.Errorf("requesting: %w", err)
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(2 * time.Minute):
		return 0, errors.New("ingest endpoint replies did not arrive within 2m")
	}
	d := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	return d, first
}

// httpPost sends every body as a batch request from httpSenders goroutines
// and returns the elapsed time. Any response other than 202 is an error.
func httpPost(ctx context.Context, url string, bodies [][]byte) (time.Duration, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: httpSenders, MaxConnsPerHost: httpSenders}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan []byte)
	start := time.Now()
	for w := 0; w < httpSenders; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range next {
				if err := postOne(ctx, hc, url, b); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, b := range bodies {
		next <- b
	}
	close(next)
	wg.Wait()
	d := time.Since(start)
	return d, first
}

func postOne(ctx context.Context, hc *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/cloudevents-batch+json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST /v1/events: %s: %.300s", resp.Status, b)
	}
	return nil
}
