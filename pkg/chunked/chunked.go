// Package chunked is Recall's protocol for request-reply answers larger than
// the server's max_payload (1 MiB by default). Replies are never cut: a large
// reply is sent as numbered chunks and reassembled by the requester.
//
// Protocol (documented in docs/api.md):
//   - A reply that fits in one message is sent as is, with no chunk headers.
//   - Otherwise the responder publishes N messages to the reply subject, in
//     order, each carrying "Recall-Chunks: N" and "Recall-Chunk: i"
//     (0-based); the body of chunk i is bytes [i*size, (i+1)*size) of the
//     reply. Other headers travel on chunk 0.
//   - The requester subscribes to its own inbox before publishing the
//     request, reads chunk 0, and when it carries Recall-Chunks reads the
//     remaining N-1 messages, checking their indices, and concatenates the
//     bodies. A missing or out-of-order chunk is an error, never a short
//     reply.
package chunked

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/recallhq/recall/pkg/events"
)

// Header names.
const (
	HeaderChunks = "Recall-Chunks"
	HeaderChunk  = "Recall-Chunk"
)

// headerAllowance is left free in every chunk for headers and protocol.
const headerAllowance = 8 << 10

// ErrNoResponders means nobody serves the subject.
var ErrNoResponders = errors.New("no responders")

// ErrBrokenReply means chunks were missing or out of order.
var ErrBrokenReply = errors.New("broken chunked reply")

// Respond sends data (with hdr) to reply, in chunks if it does not fit in
// one message of nc's max payload.
func Respond(nc *nats.Conn, reply string, hdr nats.Header, data []byte) error {
	return RespondSize(nc, reply, hdr, data, ChunkSize(nc))
}

// ChunkSize is the largest body a chunk may carry on nc.
func ChunkSize(nc *nats.Conn) int {
	size := int(nc.MaxPayload()) - headerAllowance
	if size < 1024 {
		size = 1024
	}
	return size
}

// RespondSize is Respond with an explicit chunk size (tests use small ones).
func RespondSize(nc *nats.Conn, reply string, hdr nats.Header, data []byte, size int) error {
	if reply == "" {
		return errors.New("chunked: request has no reply subject")
	}
	if len(data) <= size {
		return nc.PublishMsg(&nats.Msg{Subject: reply, Header: hdr, Data: data})
	}
	n := (len(data) + size - 1) / size
	for i := 0; i < n; i++ {
		h := nats.Header{}
		if i == 0 {
			for k, v := range hdr {
				h[k] = v
			}
		}
		h.Set(HeaderChunks, strconv.Itoa(n))
		h.Set(HeaderChunk, strconv.Itoa(i))
		end := min((i+1)*size, len(data))
		if err := nc.PublishMsg(&nats.Msg{Subject: reply, Header: h, Data: data[i*size : end]}); err != nil {
			return fmt.Errorf("sending chunk %d of %d: %w", i, n, err)
		}
	}
	return nc.Flush()
}

// Request sends data with hdr to subject and returns the reassembled reply:
// the first message's headers (chunk headers removed) with the whole body.
// For an API subject (recall.api.<verb>.<tenant>.<session>) the reply
// subject lies in the tenant's reply space (events.InboxPrefix of its tenant), the only
// place Recall's services answer; nc must be allowed to subscribe there.
// It waits until ctx is done (a deadline of 30 s applies when ctx has none).
func Request(ctx context.Context, nc *nats.Conn, subject string, hdr nats.Header, data []byte) (*nats.Msg, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	inbox := nc.NewInbox()
	if tenant, ok := events.APITenant(subject); ok {
		inbox = events.InboxPrefix(tenant) + "." + nuid.Next()
	}
	next, stop, err := replies(nc, inbox)
	if err != nil {
		return nil, err
	}
	defer stop()
	if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: inbox, Header: hdr, Data: data}); err != nil {
		return nil, err
	}
	first, err := next(ctx)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("%s: %w", subject, ErrNoResponders)
	}
	if err != nil {
		return nil, fmt.Errorf("waiting for reply on %s: %w", subject, err)
	}
	if len(first.Data) == 0 && first.Header.Get("Status") == "503" {
		return nil, fmt.Errorf("%s: %w", subject, ErrNoResponders)
	}
	ns := first.Header.Get(HeaderChunks)
	if ns == "" {
		return first, nil
	}
	n, err := strconv.Atoi(ns)
	if err != nil || n < 1 || first.Header.Get(HeaderChunk) != "0" {
		return nil, fmt.Errorf("%w: first message says chunk %q of %q", ErrBrokenReply, first.Header.Get(HeaderChunk), ns)
	}
	body := make([]byte, 0, n*len(first.Data))
	body = append(body, first.Data...)
	for i := 1; i < n; i++ {
		m, err := next(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: chunk %d of %d: %v", ErrBrokenReply, i, n, err)
		}
		if m.Header.Get(HeaderChunk) != strconv.Itoa(i) {
			return nil, fmt.Errorf("%w: got chunk %q, want %d", ErrBrokenReply, m.Header.Get(HeaderChunk), i)
		}
		body = append(body, m.Data...)
	}
	first.Header.Del(HeaderChunks)
	first.Header.Del(HeaderChunk)
	first.Data = body
	return first, nil
}

// replies subscribes to inbox and returns the function that waits for its
// next message (in order) and the one that ends the subscription. It is an
// asynchronous subscription handing messages over one at a time: a
// synchronous one allocates the connection's whole channel (64k slots by
// default, half a megabyte) for every request, most of the CPU of a small
// request-reply. Pending messages are bounded by the subscription's
// pending limits, as a synchronous subscription's are.
func replies(nc *nats.Conn, inbox string) (next func(context.Context) (*nats.Msg, error), stop func(), err error) {
	msgs := make(chan *nats.Msg)
	done := make(chan struct{})
	sub, err := nc.Subscribe(inbox, func(m *nats.Msg) {
		select {
		case msgs <- m:
		case <-done:
		}
	})
	if err != nil {
		return nil, nil, err
	}
	next = func(ctx context.Context) (*nats.Msg, error) {
		select {
		case m := <-msgs:
			return m, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	stop = func() {
		_ = sub.Unsubscribe()
		close(done)
	}
	return next, stop, nil
}
