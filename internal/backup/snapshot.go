package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/pkg/retry"
)

// The JetStream API the nats CLI uses for `nats stream backup|restore`
// (nats-server's jetstream_api.go): a snapshot request names a deliver
// subject, the server answers with the stream's configuration and state
// and then sends the snapshot (an s2-compressed archive of the stream's
// store, consumers included) in chunks, each with a reply subject the
// receiver answers to open the window for more; an empty message whose
// status header is 204 ends it (another status is the server's error). A
// restore request carries the configuration and state and is answered
// with a subject to send the chunks to, each as a request the server
// answers once it took it; an empty request ends the transfer and is
// answered with the created stream's info or the restore's error.
const (
	apiSnapshot = "$JS.API.STREAM.SNAPSHOT."
	apiRestore  = "$JS.API.STREAM.RESTORE."
	apiInfo     = "$JS.API.STREAM.INFO."
	apiDelete   = "$JS.API.STREAM.DELETE."
	apiNames    = "$JS.API.STREAM.NAMES"
)

// chunkSize is what the server's default is (128 KiB), smaller on a
// server whose max_payload is small.
func chunkSize(nc *nats.Conn) int {
	return int(min(128<<10, max(nc.MaxPayload()/2, 1<<10)))
}

// idle bounds the wait for the next chunk (the server gives up on a
// receiver after 5 s without an ack; this is the other side).
const idle = 30 * time.Second

// apiError is the error of a JetStream API answer.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s (%d, JetStream error %d)", e.Description, e.Code, e.ErrCode)
}

// streamState is the part of a stream's state the manifest records.
type streamState struct {
	Messages  uint64 `json:"messages"`
	Bytes     uint64 `json:"bytes"`
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	Consumers int    `json:"consumer_count"`
}

// snapReply is the answer to a snapshot request; Config and State are
// kept as the server wrote them, to hand back unchanged at a restore.
type snapReply struct {
	Error  *apiError       `json:"error,omitempty"`
	Config json.RawMessage `json:"config"`
	State  json.RawMessage `json:"state"`
}

// request sends a JetStream API request and decodes the answer into out,
// returning the API's error when the answer has one.
func request(ctx context.Context, nc *nats.Conn, subject string, body any, out any) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
	}
	m, err := nc.RequestWithContext(ctx, subject, b)
	if err != nil {
		return err
	}
	var e struct {
		Error *apiError `json:"error,omitempty"`
	}
	if err := json.Unmarshal(m.Data, &e); err != nil {
		return fmt.Errorf("reading the answer to %s: %w", subject, err)
	}
	if e.Error != nil {
		return e.Error
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(m.Data, out)
}

// snapshot writes stream's snapshot to w and returns the configuration
// and state the server reported when it took it. The snapshot is
// consistent in itself: the server copies the stream's store at one
// point while the stream keeps serving.
func snapshot(ctx context.Context, nc *nats.Conn, stream string, w io.Writer) (snapReply, error) {
	var r snapReply
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return r, err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, 64<<20)
	cs := chunkSize(nc)
	req := map[string]any{"deliver_subject": inbox, "chunk_size": cs, "window_size": 16 * cs}
	rctx, cancel := context.WithTimeout(ctx, idle)
	err = request(rctx, nc, apiSnapshot+stream, req, &r)
	cancel()
	if err != nil {
		return r, fmt.Errorf("asking for a snapshot of %s: %w", stream, err)
	}
	for {
		mctx, cancel := context.WithTimeout(ctx, idle)
		m, err := sub.NextMsgWithContext(mctx)
		cancel()
		if err != nil {
			return r, fmt.Errorf("receiving the snapshot of %s: %w", stream, err)
		}
		if len(m.Data) == 0 {
			if st := m.Header.Get("Status"); st != "" && st != "204" {
				return r, fmt.Errorf("the server stopped the snapshot of %s: %s %s", stream, st, m.Header.Get("Description"))
			}
			return r, nil
		}
		if _, err := w.Write(m.Data); err != nil {
			return r, fmt.Errorf("writing the snapshot of %s: %w", stream, err)
		}
		if m.Reply != "" {
			if err := m.Respond(nil); err != nil {
				return r, fmt.Errorf("acknowledging a chunk of %s: %w", stream, err)
			}
		}
	}
}

// restoreReply is the answer to the end of a restore: the created
// stream's info, or the restore's error.
type restoreReply struct {
	Error *apiError `json:"error,omitempty"`
	State struct {
		Messages uint64 `json:"messages"`
		FirstSeq uint64 `json:"first_seq"`
		LastSeq  uint64 `json:"last_seq"`
	} `json:"state"`
}

// restore creates stream from the snapshot read from r with the
// configuration and state its snapshot reported. It fails when the
// stream exists. On an error the server discards what it received; the
// stream is not created.
func restore(ctx context.Context, nc *nats.Conn, stream string, cfg, state json.RawMessage, r io.Reader) (restoreReply, error) {
	var out restoreReply
	var start struct {
		DeliverSubject string `json:"deliver_subject"`
	}
	rctx, cancel := context.WithTimeout(ctx, idle)
	err := request(rctx, nc, apiRestore+stream, map[string]json.RawMessage{"config": cfg, "state": state}, &start)
	cancel()
	if err != nil {
		return out, fmt.Errorf("starting the restore of %s: %w", stream, err)
	}
	buf := make([]byte, chunkSize(nc))
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if err := sendChunk(ctx, nc, start.DeliverSubject, buf[:n]); err != nil {
				return out, fmt.Errorf("restoring %s: %w", stream, err)
			}
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return out, fmt.Errorf("reading the snapshot of %s: %w", stream, rerr)
		}
	}
	// The server answers the end once the stream exists: that includes
	// writing it to disk, so a large stream takes a while.
	ectx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	m, err := nc.RequestWithContext(ectx, start.DeliverSubject, nil)
	if err != nil {
		return out, fmt.Errorf("finishing the restore of %s: %w", stream, err)
	}
	if err := json.Unmarshal(m.Data, &out); err != nil {
		return out, fmt.Errorf("reading the answer to the restore of %s: %w", stream, err)
	}
	if out.Error != nil {
		return out, fmt.Errorf("the server refused the restore of %s: %w", stream, out.Error)
	}
	return out, nil
}

// noResponders bounds the resends of a chunk nobody received.
var noResponders = retry.Policy{First: 20 * time.Millisecond, Max: 250 * time.Millisecond, Attempts: 40}

// sendChunk sends one chunk and waits for the server to take it: an
// empty answer, or a restore error.
func sendChunk(ctx context.Context, nc *nats.Conn, subject string, chunk []byte) error {
	cctx, cancel := context.WithTimeout(ctx, idle)
	defer cancel()
	var m *nats.Msg
	// On a cluster the restore's subject may be served by another node
	// whose interest has not reached ours yet: nobody received the chunk,
	// so sending it again is safe.
	err := noResponders.Do(cctx, nil, "sending a chunk", func(ctx context.Context) error {
		var err error
		m, err = nc.RequestWithContext(ctx, subject, chunk)
		if err != nil && !errors.Is(err, nats.ErrNoResponders) {
			return retry.Permanent(err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sending a chunk: %w", err)
	}
	if len(m.Data) == 0 {
		return nil
	}
	var e struct {
		Error *apiError `json:"error,omitempty"`
	}
	if json.Unmarshal(m.Data, &e) == nil && e.Error != nil {
		return fmt.Errorf("the server refused a chunk: %w", e.Error)
	}
	return nil
}
