package indexersvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/pkg/events"
)

// ServiceName is the indexer's micro service.
const ServiceName = "recall-indexer"

// apiError is a refusal (internal/microapi).
type apiError = microapi.Error

var fail = microapi.Fail

// serve adds the micro service with the index endpoints, from one
// endpoint table (internal/microapi). Requests work under ctx (the
// service's lifetime: stopping cancels them) and their own deadline. The
// index read answers at once (one KV read, within Timeout); the expensive
// endpoints answer later under x.admit: a tenant with TenantRequests in
// flight is refused 429, a replica with Requests in flight 503, both with
// Retry-After (docs/sessions.md). The lifecycle adopts the service and
// awaits later, so the connection drains only after the answers in flight.
func (x *Indexer) serve(ctx context.Context, log *slog.Logger) (micro.Service, *microapi.Later, error) {
	later := microapi.NewLater(ctx, x.nc, log, 0)
	type fn = func(ctx context.Context, tenant, session string, body []byte) (any, *apiError)
	handle := func(f fn) microapi.Handler {
		return func(ctx context.Context, r microapi.Request) (any, *apiError) {
			return f(ctx, r.Tenant, r.Session, r.Data)
		}
	}
	slow := func(verb string, f fn) microapi.Endpoint {
		return microapi.Endpoint{Verb: verb, Mode: microapi.AnswerLater, Admission: x.admit, Handle: handle(f)}
	}
	svc, err := microapi.Serve(later, microapi.Service{Name: ServiceName,
		Description: "Recall indexer: session index, references and questions to past sessions",
		Endpoints: []microapi.Endpoint{
			{Verb: events.VerbIndex, Mode: microapi.AnswerLater, Admission: microapi.NewReadAdmission(),
				Handle: microapi.WithTimeout(x.cfg.Timeout, handle(x.apiIndex))},
			slow(events.VerbSessions, x.apiSessions),
			slow(events.VerbReindex, x.apiReindex),
			slow(events.VerbResolve, x.apiResolve),
			slow(events.VerbQuery, x.apiQuery),
		}})
	if err != nil {
		return nil, nil, err
	}
	return svc, later, nil
}

var decodeBody = microapi.DecodeBody

func (x *Indexer) apiIndex(ctx context.Context, tenant, session string, _ []byte) (any, *apiError) {
	idx, rev, err := x.entries.get(ctx, tenant, session)
	if errors.Is(err, errNotFound) {
		return nil, fail(404, "session %s has no index entry yet", session)
	}
	if err != nil {
		return nil, fail(503, "%v", err)
	}
	return events.IndexReply{Index: idx, Revision: rev}, nil
}

func (x *Indexer) apiReindex(ctx context.Context, tenant, session string, body []byte) (any, *apiError) {
	var none struct{}
	if aerr := decodeBody(body, &none); aerr != nil {
		return nil, aerr
	}
	ctx, cancel := context.WithTimeout(ctx, x.cfg.ReindexWait+x.cfg.Timeout)
	defer cancel()
	out, err := x.maybeIndex(ctx, indexJob{tenant: tenant, session: session, reason: events.IndexReasonForced})
	switch {
	case errors.Is(err, errDisabled):
		return nil, fail(503, "%v", err)
	case errors.Is(err, errEphemeral):
		return nil, fail(409, "session %s: %v", session, err)
	case errors.Is(err, errNothingNew):
		return nil, fail(404, "session %s has no transcript records", session)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fail(504, "indexing %s did not finish in time (a running indexing of it may still be going)", session)
	case err != nil:
		return nil, fail(503, "%v", err)
	}
	idx, rev, err := x.entries.get(ctx, tenant, session)
	if err != nil && !errors.Is(err, errNotFound) {
		return nil, fail(503, "%v", err)
	}
	return events.IndexReply{Index: idx, Revision: rev, Outcome: out}, nil
}

// maxPage caps SessionsRequest.Limit.
const maxPage = 500

func (x *Indexer) apiSessions(ctx context.Context, tenant, session string, body []byte) (any, *apiError) {
	if session != events.TenantScope {
		return nil, fail(400, "%s addresses a tenant: its session token must be %q", events.VerbSessions, events.TenantScope)
	}
	var req events.SessionsRequest
	if aerr := decodeBody(body, &req); aerr != nil {
		return nil, aerr
	}
	if req.Limit <= 0 {
		req.Limit = 50
	}
	if req.Limit > maxPage {
		return nil, fail(400, "limit %d: at most %d", req.Limit, maxPage)
	}
	ctx, cancel := context.WithTimeout(ctx, x.cfg.Timeout)
	defer cancel()
	offset := 0
	if req.Cursor != "" {
		n, err := strconv.Atoi(req.Cursor)
		if err != nil || n < 0 {
			return nil, fail(400, "cursor %q is not one this service returned", req.Cursor)
		}
		offset = n
	}
	all, err := x.entries.list(ctx, tenant)
	if err != nil {
		return nil, fail(503, "%v", err)
	}
	words := strings.Fields(strings.ToLower(req.Q))
	tag := strings.ToLower(strings.TrimSpace(req.Tag))
	kept := all[:0]
	for _, s := range all {
		if !s.Ephemeral && matches(s, words, tag) {
			kept = append(kept, s)
		}
	}
	sort.SliceStable(kept, func(i, j int) bool {
		if !kept[i].UpdatedAt.Equal(kept[j].UpdatedAt) {
			return kept[i].UpdatedAt.After(kept[j].UpdatedAt)
		}
		return kept[i].Session < kept[j].Session
	})
	reply := events.SessionsReply{Sessions: []events.SessionIndex{}}
	if offset < len(kept) {
		end := min(offset+req.Limit, len(kept))
		reply.Sessions = kept[offset:end]
		if end < len(kept) {
			reply.Next = strconv.Itoa(end)
		}
	}
	return reply, nil
}

// matches reports whether s has tag (when set) and every word.
func matches(s events.SessionIndex, words []string, tag string) bool {
	if tag != "" {
		found := false
		for _, t := range s.Tags {
			if t == tag {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if len(words) == 0 {
		return true
	}
	hay := strings.ToLower(strings.Join(append([]string{s.Session, s.Name, s.Description, s.Summary}, s.Tags...), "\n"))
	for _, w := range words {
		if !strings.Contains(hay, w) {
			return false
		}
	}
	return true
}

func (x *Indexer) apiResolve(ctx context.Context, tenant, session string, body []byte) (any, *apiError) {
	if session != events.TenantScope {
		return nil, fail(400, "%s addresses a tenant: its session token must be %q", events.VerbResolve, events.TenantScope)
	}
	var req events.ResolveRequest
	if aerr := decodeBody(body, &req); aerr != nil {
		return nil, aerr
	}
	if (req.Ref == "") == (req.Text == "") {
		return nil, fail(400, "give exactly one of ref (a session id or name) and text (a message with @@references)")
	}
	ctx, cancel := context.WithTimeout(ctx, x.cfg.Timeout)
	defer cancel()
	if req.Ref != "" {
		r, aerr := x.resolve(ctx, tenant, strings.TrimPrefix(req.Ref, "@@"))
		if aerr != nil {
			return nil, aerr
		}
		return events.ResolveReply{Resolved: []events.Resolution{r}}, nil
	}
	return x.references(ctx, tenant, req.Text, req.Answer)
}

func (x *Indexer) apiQuery(ctx context.Context, tenant, session string, body []byte) (any, *apiError) {
	var req events.QueryRequest
	if aerr := decodeBody(body, &req); aerr != nil {
		return nil, aerr
	}
	if strings.TrimSpace(req.Question) == "" {
		return nil, fail(400, "question is required")
	}
	if req.BudgetTokens < 0 {
		return nil, fail(400, "budget_tokens must not be negative")
	}
	ctx, cancel := context.WithTimeout(ctx, x.cfg.Timeout)
	defer cancel()
	began := time.Now()
	r, aerr := x.resolve(ctx, tenant, session)
	if aerr != nil {
		x.m.queried(ctx, "error", 0)
		return nil, aerr
	}
	reply, aerr := x.query(ctx, tenant, r.Session.Session, req, began)
	if aerr != nil {
		x.m.queried(ctx, "error", 0)
		return nil, aerr
	}
	return reply, nil
}

func ambiguous(ref string, matches []events.SessionIndex) *apiError {
	p := &events.Problem{Type: events.ProblemTypeBase + "ambiguous-reference", Title: http.StatusText(http.StatusConflict), Status: http.StatusConflict, Ref: ref}
	names := make([]string, len(matches))
	for i, m := range matches {
		p.Candidates = append(p.Candidates, events.Candidate{Session: m.Session, Name: m.Name, Description: m.Description})
		names[i] = m.Name + " (" + m.Session + ")"
	}
	p.Detail = fmt.Sprintf("reference %q matches %d sessions: %s; use a session id or an exact name", ref, len(matches), strings.Join(names, ", "))
	return &apiError{Code: http.StatusConflict, Msg: p.Detail, Problem: p}
}
