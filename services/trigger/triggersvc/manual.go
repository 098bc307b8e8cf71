package triggersvc

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// ServiceName is the micro service the trigger registers.
const ServiceName = "recall-trigger"

// ErrNoMessages is the error text of a manual extraction of an empty
// session, as the reference words it; it is answered as a 422 micro error
// (HTTP 422 through the edge), not as a result with success false.
const ErrNoMessages = "no messages to summarize"

// maxManualTimeout caps the wait a client may ask for.
const maxManualTimeout = 10 * time.Minute

// ServeManual registers the micro service ServiceName with the endpoint
// "extract" on recall.api.extract.<tenant>.<session>: a manual extraction
// that bypasses thresholds and gates and answers events.ExtractResult once
// the extractor finished (bounded by the request's timeout_ms or
// Config.ExtractTimeout). Requests are served concurrently through the
// returned Later: ctx (the service's run context) cancels the waits in
// progress, which are then answered 503. The caller stops the returned
// service, then the Later (before the connection drains).
func (t *Trigger) ServeManual(ctx context.Context) (micro.Service, *microapi.Later, error) {
	later := microapi.NewLater(ctx, t.nc, t.log, 0)
	svc, err := microapi.Serve(later, microapi.Service{Name: ServiceName, Description: "Recall trigger: manual extraction",
		Endpoints: []microapi.Endpoint{{Verb: events.VerbExtract, Mode: microapi.AnswerLater,
			// Each request waits for its extraction: a tenant may have
			// manualPerTenant waiting, the replica manualInAll.
			Admission: microapi.NewAdmission(manualPerTenant, manualInAll, time.Second),
			// A request that can be refused at once is answered in the
			// handler, through micro (which counts the error); one that
			// waits is answered later.
			Check: func(ctx context.Context, r *microapi.Request) *microapi.Error {
				in, aerr := t.parseManual(*r)
				if aerr != nil {
					t.m.manual.Add(ctx, 1, reasonAttr("error_"+strconv.Itoa(aerr.Code)))
					return aerr
				}
				r.Value = in
				return nil
			},
			Handle: func(ctx context.Context, r microapi.Request) (any, *microapi.Error) {
				return t.manual(ctx, r.Value.(manualRequest))
			}}}})
	if err != nil {
		return nil, nil, err
	}
	return svc, later, nil
}

// The bounds of manual extractions waiting at once on one replica (the
// HTTP edge's calls lane bounds its own twin).
const (
	manualPerTenant = 8
	manualInAll     = 256
)

// manualRequest is a parsed manual extraction request.
type manualRequest struct {
	tenant, session string
	timeout         time.Duration
}

// parseManual validates a manual extraction request.
func (t *Trigger) parseManual(r microapi.Request) (manualRequest, *microapi.Error) {
	var body events.ExtractRequest
	if len(r.Data) > 0 {
		if err := json.Unmarshal(r.Data, &body); err != nil {
			return manualRequest{}, microapi.Fail(400, "decoding extract request: %v", err)
		}
	}
	in := manualRequest{tenant: r.Tenant, session: r.Session, timeout: t.cfg.ExtractTimeout}
	if body.TimeoutMS > 0 {
		in.timeout = min(time.Duration(body.TimeoutMS)*time.Millisecond, maxManualTimeout)
	}
	return in, nil
}

// manual runs one manual extraction and counts its outcome (a failed
// extraction is an answer, not an error).
func (t *Trigger) manual(ctx context.Context, in manualRequest) (any, *microapi.Error) {
	res, code, msg := t.extract(ctx, in)
	if code != "" {
		t.m.manual.Add(ctx, 1, reasonAttr("error_"+code))
		n, _ := strconv.Atoi(code)
		return nil, &microapi.Error{Code: n, Msg: msg}
	}
	outcome := "success"
	if !res.Success {
		outcome = "failure"
	}
	t.m.manual.Add(ctx, 1, reasonAttr(outcome))
	return res, nil
}

// extract runs one manual extraction; code is a micro error code when the
// request could not be served.
func (t *Trigger) extract(ctx context.Context, in manualRequest) (res events.ExtractResult, code, msg string) {
	tenant, session := in.tenant, in.session
	wait := time.NewTimer(in.timeout)
	defer wait.Stop()
	ctx, cancel := context.WithTimeout(ctx, in.timeout+10*time.Second) // reads and publishes get their own margin
	defer cancel()
	ctx, span := t.tracer.Start(ctx, "trigger.manual_extract")
	defer span.End()

	head, err := t.reader.LastSeq(ctx, tenant, session)
	if err != nil {
		return res, "503", "reading transcript head: " + err.Error()
	}
	res.MemoryKey = events.MemoryKey(tenant, session)
	if head == 0 {
		return res, "422", ErrNoMessages + ": session " + session + " has no transcript events"
	}
	res.UpToSeq = head
	return t.requestAndWait(ctx, tenant, session, head, res, wait.C)
}

// requestAndWait publishes a manual request up to head and waits for its
// outcome (or for wait).
func (t *Trigger) requestAndWait(ctx context.Context, tenant, session string, head uint64, res events.ExtractResult, wait <-chan time.Time) (events.ExtractResult, string, string) {
	upToID := ""
	if recs, err := t.reader.Read(ctx, tenant, session, head, head, 1); err == nil && len(recs) == 1 && recs[0].Message != nil {
		upToID = recs[0].Message.UUID
	}
	// Subscribe before publishing so the outcome cannot be missed.
	ch := make(chan *nats.Msg, 64)
	for _, kind := range []string{events.KindExtractionCompleted, events.KindExtractionFailed} {
		sub, err := t.nc.ChanSubscribe(events.EventsSubject(kind, tenant, session), ch)
		if err != nil {
			return res, "503", "subscribing to extraction outcomes: " + err.Error()
		}
		defer sub.Unsubscribe()
	}
	req := events.ExtractionRequested{Tenant: tenant, Session: session, UpToSeq: head, UpToID: upToID, Reason: events.ReasonManual}
	for _, m := range requestMsgs(ctx, req) {
		if _, err := t.js.PublishMsg(ctx, m); err != nil {
			return res, "503", "publishing extraction request: " + err.Error()
		}
	}
	t.m.decisions.Add(ctx, 1, reasonAttr(events.ReasonManual))

	// Already covered (e.g. the same position was requested by a threshold
	// decision that finished before we subscribed)?
	if rev, covered := t.covered(ctx, tenant, session, head); covered {
		res.Success, res.Revision = true, rev
		return res, "", ""
	}
	for {
		select {
		case m := <-ch:
			if done := outcome(m, head, &res); done {
				return res, "", ""
			}
		case <-wait:
			return res, "504", "timed out waiting for the extraction; it continues in the background"
		case <-ctx.Done():
			return res, "503", "trigger stopping"
		}
	}
}

// outcome applies a completed or failed event covering head to res and
// reports whether it ends the wait.
func outcome(m *nats.Msg, head uint64, res *events.ExtractResult) bool {
	e, err := natsce.FromMsg(m)
	if err != nil {
		return false
	}
	switch e.Type() {
	case events.TypeExtractionCompleted:
		var c events.ExtractionCompleted
		if json.Unmarshal(e.Data(), &c) == nil && (c.UpToSeq >= head || c.CoveredSeq >= head) {
			res.Success, res.Revision = true, c.Revision
			return true
		}
	case events.TypeExtractionFailed:
		var f events.ExtractionFailed
		if json.Unmarshal(e.Data(), &f) == nil && f.UpToSeq >= head {
			res.Error = f.Error
			if res.Error == "" {
				res.Error = "extraction failed: " + f.Reason
			}
			return true
		}
	}
	return false
}

// covered reports whether the session's memory already covers seq.
func (t *Trigger) covered(ctx context.Context, tenant, session string, seq uint64) (uint64, bool) {
	kv, err := t.js.KeyValue(ctx, events.BucketMemory)
	if err != nil {
		return 0, false
	}
	rec, rev, err := store.NewMemory(kv).Get(ctx, tenant, session)
	if err != nil {
		t.log.Debug("reading memory record", "err", err)
		return 0, false
	}
	return rev, rev > 0 && rec.CoveredSeq >= seq
}
