package ingestsvc

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
)

// UploadStore holds the chunks of chunked ingest requests (the
// events.BucketBlobs Object Store, a jetstream.ObjectStore): every
// instance can read a chunk another one stored.
type UploadStore interface {
	GetBytes(ctx context.Context, name string, opts ...jetstream.GetObjectOpt) ([]byte, error)
	PutBytes(ctx context.Context, name string, data []byte) (*jetstream.ObjectInfo, error)
	Delete(ctx context.Context, name string) error
}

// UseUploads makes the endpoint accept chunked requests (pkg/chunked's
// SendRequest): bodies over the server's max_payload, up to the body
// limit, sent as chunks that are stored in store until the last one
// arrives. Without it a chunked request is refused (400).
func (h *NATSHandler) UseUploads(store UploadStore, timeout time.Duration) {
	h.uploads, h.uploadTimeout = store, timeout
}

// uploadChunk is the name of chunk i of upload id: under the session's
// objects (an erase removes them with the session's blobs); "upload.<id>"
// cannot be an event id (ids have no dots), so no blob has that name.
func uploadChunk(tenant, session, id string, i int) string {
	return tenant + "/" + session + "/upload." + id + "/" + strconv.Itoa(i)
}

// uploadPart is a chunk before the last of a chunked request, admitted
// and stored by the endpoint's Start.
type uploadPart struct {
	name, id string
	index    int
	data     []byte
}

// upload handles a chunk of a chunked request in the endpoint's Check. A
// chunk before the last becomes r.Value, an uploadPart for Start to store
// once admitted; done is true. For the last chunk it reassembles the
// body into r.Data, leaves the request's other headers in r.Header and
// returns done false: the endpoint serves it as one request. A refusal
// is the error.
func (h *NATSHandler) upload(ctx context.Context, r *microapi.Request) (done bool, _ *microapi.Error) {
	id := r.Header.Get(chunked.HeaderUpload)
	i, err1 := strconv.Atoi(r.Header.Get(chunked.HeaderChunk))
	n, err2 := strconv.Atoi(r.Header.Get(chunked.HeaderChunks))
	switch {
	case h.uploads == nil:
		return true, h.refuseUpload(ctx, http.StatusBadRequest, "this ingest does not take chunked requests")
	case events.ValidateID(id) != nil || err1 != nil || err2 != nil || i < 0 || i >= n || n > chunked.MaxRequestChunks:
		return true, h.refuseUpload(ctx, http.StatusBadRequest, fmt.Sprintf("malformed chunk headers: upload %q, chunk %q of %q (at most %d chunks)",
			id, r.Header.Get(chunked.HeaderChunk), r.Header.Get(chunked.HeaderChunks), chunked.MaxRequestChunks))
	case int64(i)*int64(len(r.Data)) > h.limits.MaxBodyBytes:
		return true, h.refuseUpload(ctx, http.StatusRequestEntityTooLarge, fmt.Sprintf("a chunked request over %d bytes", h.limits.MaxBodyBytes))
	}
	if i < n-1 {
		r.Value = uploadPart{name: uploadChunk(r.Tenant, r.Session, id, i), id: id, index: i, data: append([]byte(nil), r.Data...)}
		return true, nil
	}
	body, p := h.reassemble(ctx, r.Tenant, r.Session, id, n, r.Data)
	if p != nil {
		h.in.reject(ctx, "invalid_body", 1)
		return true, problemError(p)
	}
	rest := nats.Header{}
	for k, v := range r.Header {
		if k != chunked.HeaderUpload && k != chunked.HeaderChunk && k != chunked.HeaderChunks {
			rest[k] = v
		}
	}
	r.Data, r.Header = body, rest
	return false, nil
}

// storePart is the work of an admitted chunk: store it, answer it stored.
func (h *NATSHandler) storePart(part uploadPart) microapi.Work {
	return func(ctx context.Context) (any, *microapi.Error) {
		ctx, cancel := context.WithTimeout(ctx, h.uploadTimeout)
		defer cancel()
		if _, err := h.uploads.PutBytes(ctx, part.name, part.data); err != nil {
			return nil, microapi.Fail(http.StatusServiceUnavailable, "storing chunk %d of upload %s: %v; nothing of the request was stored, send it again", part.index, part.id, err)
		}
		return map[string]any{"upload": part.id, "chunk": part.index, "stored": true}, nil
	}
}

// reassemble reads the n-1 stored chunks of upload id, appends last and
// deletes them. A missing chunk is a 503 (send the request again).
func (h *NATSHandler) reassemble(ctx context.Context, tenant, session, id string, n int, last []byte) ([]byte, *events.Problem) {
	ctx, cancel := context.WithTimeout(ctx, h.uploadTimeout)
	defer cancel()
	var body []byte
	for i := 0; i < n-1; i++ {
		part, err := h.uploads.GetBytes(ctx, uploadChunk(tenant, session, id, i))
		if err != nil {
			return nil, newProblem(ProblemUnavailable, http.StatusServiceUnavailable,
				fmt.Sprintf("reading chunk %d of upload %s: %v; nothing of the request was stored, send it again", i, id, err))
		}
		if body == nil {
			body = make([]byte, 0, n*len(part))
		}
		if body = append(body, part...); int64(len(body)) > h.limits.MaxBodyBytes {
			return nil, newProblem(ProblemTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("a chunked request over %d bytes", h.limits.MaxBodyBytes))
		}
	}
	for i := 0; i < n-1; i++ {
		_ = h.uploads.Delete(ctx, uploadChunk(tenant, session, id, i)) // left over: ages out with the bucket
	}
	return append(body, last...), nil
}

// refuseUpload is the refusal of a malformed or refused chunk.
func (h *NATSHandler) refuseUpload(ctx context.Context, status int, detail string) *microapi.Error {
	h.in.reject(ctx, "invalid_body", 1)
	kind := ProblemInvalidBody
	if status == http.StatusRequestEntityTooLarge {
		kind = ProblemTooLarge
	}
	return problemError(newProblem(kind, status, detail))
}
