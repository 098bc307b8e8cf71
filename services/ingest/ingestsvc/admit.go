package ingestsvc

import (
	"context"
	"net/http"
	"time"

	"github.com/recallhq/recall/internal/microapi"
)

// Problem type of a request refused by admission over its tenant's share.
const ProblemTooManyRequests = "too-many-requests"

// Admission bounds what the HTTP edge works on at once, per tenant and in
// all, in four lanes that never wait on one another:
//
//   - small bodies: request bodies announced at most LargeBodyBytes;
//   - large bodies: bodies announced larger, or of unknown length;
//   - calls: expensive work the edge forwards or does (extract, compact,
//     edit, query, resolve, reindex, commit, session listings, console
//     reads);
//   - reads: small reads (GET memory, GET index, GET user memory).
//
// A tenant is admitted after authentication and before a byte of its body
// is read. A tenant over its share is answered 429, a full lane 503, both
// with Retry-After; neither is ever queued. A nil lane admits everything.
// Health and readiness bypass admission.
type Admission struct {
	Small, Large, Calls, Reads *microapi.Admission
	// LargeBodyBytes is the largest body the small lane takes.
	LargeBodyBytes int64
}

// newAdmission builds the edge's lanes from cfg.
func newAdmission(cfg Config) *Admission {
	const retry = time.Second
	return &Admission{
		Small:          microapi.NewAdmission(cfg.TenantBodies, cfg.MaxBodies, retry),
		Large:          microapi.NewAdmission(cfg.TenantLarge, cfg.MaxLargeBodies, retry),
		Calls:          microapi.NewAdmission(cfg.TenantCalls, cfg.MaxCalls, retry),
		Reads:          microapi.NewAdmission(cfg.TenantReads, cfg.MaxReads, retry),
		LargeBodyBytes: cfg.LargeBodyBytes,
	}
}

// bodyLane is the lane of a body announced as size bytes (-1: unknown).
func (a *Admission) bodyLane(size int64) *microapi.Admission {
	if a == nil {
		return nil
	}
	if size >= 0 && size <= a.LargeBodyBytes {
		return a.Small
	}
	return a.Large
}

// admitBody takes a body slot for tenant, sized by r's Content-Length;
// when refused it has answered and ok is false.
func (a *Admission) admitBody(ctx context.Context, w http.ResponseWriter, r *http.Request, tenant, endpoint string) (release func(), ok bool) {
	if r.ContentLength == 0 {
		return func() {}, true
	}
	return admit(ctx, w, a.bodyLane(r.ContentLength), tenant, endpoint)
}

// lane returns one of a's lanes (nil when a is nil).
func (a *Admission) lane(pick func(*Admission) *microapi.Admission) *microapi.Admission {
	if a == nil {
		return nil
	}
	return pick(a)
}

// admit takes a slot of lane for tenant, or answers the refusal (429 over
// the tenant's share, 503 when the lane is full, with Retry-After), counts
// it (recall_admission_rejected_total) and returns false.
func admit(ctx context.Context, w http.ResponseWriter, lane *microapi.Admission, tenant, endpoint string) (release func(), ok bool) {
	release, aerr := lane.Admit(tenant)
	if aerr == nil {
		return release, true
	}
	microapi.CountRejected(ctx, endpoint, tenant, aerr)
	writeRefusal(w, aerr)
	return nil, false
}

// writeRefusal answers an admission refusal as a problem with Retry-After.
func writeRefusal(w http.ResponseWriter, aerr *microapi.Error) {
	kind := ProblemUnavailable
	if aerr.Code == http.StatusTooManyRequests {
		kind = ProblemTooManyRequests
	}
	if aerr.RetryAfter > 0 {
		w.Header().Set("Retry-After", microapi.RetryAfter(aerr.RetryAfter))
	}
	writeProblem(w, newProblem(kind, aerr.Code, aerr.Msg))
}
