package chunked

import (
	"context"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// HeaderUpload names the upload a chunk of a chunked request belongs to.
const HeaderUpload = "Recall-Upload"

// MaxRequestChunks is the most chunks a chunked request may have.
const MaxRequestChunks = 1024

// Chunked requests, for request bodies over the server's max_payload
// (served by endpoints that say so, e.g. the ingest endpoint):
//   - The requester picks an upload id and sends the body as N requests to
//     the same subject, in order, each carrying "Recall-Upload: <id>",
//     "Recall-Chunks: N" and "Recall-Chunk: i" (0-based), the body of
//     chunk i being bytes [i*size, (i+1)*size) of the whole. It sends
//     chunk i+1 only once chunk i was answered.
//   - The responder that receives chunk i < N-1 stores it where every
//     instance can read it and answers when it is stored; any instance may
//     receive any chunk (a queue group spreads them).
//   - The last chunk carries the request's other headers; the responder
//     that receives it reassembles the body and answers the whole request
//     as if it had come in one message.
//   - A chunk answered with an error (a Nats-Service-Error-Code header)
//     ends the upload; that answer is the request's. Sending the same
//     chunks again is safe: a stored chunk is overwritten with itself.

// SendRequest sends data (with hdr) as a request to subject and returns the
// reply, reassembled when chunked (see Request): in one message when it
// fits nc's max payload, else as a chunked request of ChunkSize(nc) chunks.
func SendRequest(ctx context.Context, nc *nats.Conn, subject string, hdr nats.Header, data []byte) (*nats.Msg, error) {
	return SendRequestSize(ctx, nc, subject, hdr, data, ChunkSize(nc))
}

// SendRequestSize is SendRequest with an explicit chunk size.
func SendRequestSize(ctx context.Context, nc *nats.Conn, subject string, hdr nats.Header, data []byte, size int) (*nats.Msg, error) {
	if len(data) <= size {
		return Request(ctx, nc, subject, hdr, data)
	}
	n := (len(data) + size - 1) / size
	if n > MaxRequestChunks {
		return nil, fmt.Errorf("chunked: a request of %d bytes needs %d chunks, more than %d", len(data), n, MaxRequestChunks)
	}
	id := nuid.Next()
	for i := 0; i < n; i++ {
		h := nats.Header{}
		if i == n-1 {
			for k, v := range hdr {
				h[k] = v
			}
		}
		h.Set(HeaderUpload, id)
		h.Set(HeaderChunks, strconv.Itoa(n))
		h.Set(HeaderChunk, strconv.Itoa(i))
		end := min((i+1)*size, len(data))
		m, err := Request(ctx, nc, subject, h, data[i*size:end])
		if err != nil {
			return nil, fmt.Errorf("chunk %d of %d: %w", i, n, err)
		}
		if i == n-1 || m.Header.Get("Nats-Service-Error-Code") != "" {
			return m, nil
		}
	}
	panic("unreachable")
}
