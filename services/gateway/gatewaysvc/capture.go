package gatewaysvc

import (
	"errors"
	"hash/fnv"
	"io"
	"net/http"
	"strings"

	"github.com/recallhq/recall/services/gateway/wire"
)

// Capture, from the traffic: once the upstream's answer to a model request
// is complete, the request's messages not yet stored and the reply become
// the session's transcript records (wire.History.Records; ids:
// wire.RecordIDs), published through pkg/client after the response
// reached the client — off its path: the exchange only hands a job to a
// bounded queue.
//
//   - The reply is reassembled on the side (wire.Assembler) while each
//     chunk is forwarded as it arrives; only text, tool inputs and usage are
//     kept, at most maxReplyBytes.
//   - Nothing is captured of an exchange whose response is not a complete
//     2xx answer (an upstream error such as 529, a stream cut short, a
//     client that went away): the client's next request resends its
//     history, and capture stores it then.
//   - Queues are per worker (captureWorkers), a session's jobs always on
//     the same worker, in order; they hold at most Config.CaptureQueue jobs
//     and captureQueueBytes of request bodies in all. A job that does not
//     fit is dropped and counted (Stats.CaptureFailed); its messages are
//     stored with the session's next request.
//   - A publish that fails (NATS down, a Recall service refusing) counts
//     Stats.CaptureFailed and Stats.FailOpen and is logged at most once per
//     failOpenLogEvery; what was not stored is stored with the session's
//     next request (see sessionState).

// captureWorkers is the number of goroutines publishing captures.
const captureWorkers = 4

// captureQueueBytes bounds the request bodies the capture queues hold.
const captureQueueBytes = 256 << 20

// maxReplyBytes bounds what the reassembly of one reply keeps.
const maxReplyBytes = 16 << 20

// captureJob is one exchange to capture.
type captureJob struct {
	tenant string
	api    string      // wire.ReplyAnthropic, ReplyChat or ReplyResponses
	header http.Header // only the headers capture reads (never a key)
	body   []byte      // the request as the client sent it
	reply  *wire.Reply
}

// capturedHeaders are the request headers a capture job keeps.
var capturedHeaders = []string{HeaderRecallSession, "X-Claude-Code-Session-Id", "X-Claude-Code-Agent-Id"}

// captureAPI is the capture API of the exchange's endpoint, "" for none.
func (x *exchange) captureAPI() string {
	switch x.p.name + x.path {
	case "anthropic/v1/messages":
		return wire.ReplyAnthropic
	case "openai/v1/chat/completions":
		return wire.ReplyChat
	case "openai/v1/responses":
		return wire.ReplyResponses
	}
	return ""
}

// captureHook returns the response hook that captures the exchange, or nil
// when there is nothing to capture (Recall not attached: counted as fail
// open; an endpoint capture does not read).
func (x *exchange) captureHook() respHook {
	api := x.captureAPI()
	if api == "" {
		return nil
	}
	c := x.g.capture
	if x.g.recall.Load() == nil {
		x.g.stats.FailOpen.Add(1)
		c.failOpen.log(x.g.log, "Recall is not connected: forwarding without capture", nil)
		return nil
	}
	job := &captureJob{tenant: x.tenant, api: api, body: x.body, header: http.Header{}}
	for _, h := range capturedHeaders {
		if v := x.r.Header.Get(h); v != "" {
			job.header.Set(h, v)
		}
	}
	return func(resp *http.Response) error {
		if resp.StatusCode/100 != 2 {
			return nil // errors pass verbatim and are not captured
		}
		stream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
		resp.Body = &teeBody{ReadCloser: resp.Body, asm: wire.NewAssembler(api, stream, maxReplyBytes), job: job, c: c, size: resp.ContentLength}
		return nil
	}
}

// teeBody feeds the response to the assembler as the proxy copies it to
// the client, and queues the job once the reply is complete.
type teeBody struct {
	io.ReadCloser
	asm    *wire.Assembler
	job    *captureJob
	c      *capturer
	size   int64 // the body's length when known (-1 for a stream)
	read   int64
	linked bool // the response's chain link is set (Responses)
	queued bool
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		_, _ = t.asm.Write(p[:n])
		t.read += int64(n)
	}
	// The reply's last bytes are in p: the client has not seen them yet.
	if !t.linked && (t.asm.Done() || (t.size > 0 && t.read == t.size) || errors.Is(err, io.EOF)) {
		t.link()
	}
	if errors.Is(err, io.EOF) {
		t.finish()
	}
	return n, err
}

// link remembers which session a Responses reply belongs to before the
// client can continue it with previous_response_id, so the next request
// finds its session at once (the compaction code asks on the request path)
// even if this exchange's capture is still queued or is dropped.
func (t *teeBody) link() {
	t.linked = true
	if t.job.api != wire.ReplyResponses {
		return
	}
	reply, err := t.asm.Reply()
	if err != nil {
		return
	}
	r, err := wire.DecodeResponsesForRecords(t.job.body)
	if err != nil {
		return
	}
	t.c.chains.put(reply.ID, ResponsesSession(t.job.header, r, &t.c.chains).ID)
}

// Close queues the job when the reply is complete (a stream whose last
// event came but whose connection was not read to EOF).
func (t *teeBody) Close() error {
	t.finish()
	return t.ReadCloser.Close()
}

func (t *teeBody) finish() {
	if t.queued {
		return
	}
	t.queued = true
	reply, err := t.asm.Reply()
	if err != nil {
		return // incomplete: the next request captures the history
	}
	t.job.reply = reply
	t.c.enqueue(t.job)
}

// shardOf is the worker of a job: by its session header, so a session's
// jobs stay in order (requests without one share worker 0).
func shardOf(h http.Header) int {
	key := h.Get(HeaderRecallSession)
	if key == "" {
		key = h.Get("X-Claude-Code-Session-Id")
	}
	if key == "" {
		return 0
	}
	f := fnv.New32a()
	_, _ = f.Write([]byte(key))
	return int(f.Sum32() % captureWorkers)
}
