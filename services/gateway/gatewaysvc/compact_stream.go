package gatewaysvc

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/recallhq/recall/services/gateway/wire"
)

// HeaderRecallGateway says on an answer what the gateway did: "compacted"
// for one it made from memory without calling the upstream.
const HeaderRecallGateway = "X-Recall-Gateway"

func newID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// writeMessage answers a Messages request from the gateway itself, in the
// API's shape: one message with content (text and compaction blocks) and
// stop reason, as JSON or, when stream, as the API's event stream.
func writeMessage(w http.ResponseWriter, model string, stream bool, content []any, stop string, inTokens int64) {
	usage := map[string]int64{"input_tokens": inTokens, "output_tokens": outputTokens(content)}
	msg := map[string]any{"id": newID("msg_recall_"), "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage}
	w.Header().Set(HeaderRecallGateway, "compacted")
	if !stream {
		b, _ := json.Marshal(msg)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	var b bytes.Buffer
	sseEvent(&b, "message_start", map[string]any{"type": "message_start", "message": start})
	for i, c := range content {
		blockEvents(&b, i, c)
	}
	sseEvent(&b, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int64{"output_tokens": usage["output_tokens"]}})
	sseEvent(&b, "message_stop", map[string]string{"type": "message_stop"})
	_, _ = w.Write(b.Bytes())
}

// blockEvents writes the start, delta and stop events of one block at
// index i: a text block or a compaction block.
func blockEvents(b *bytes.Buffer, i int, c any) {
	switch v := c.(type) {
	case wire.CompactionBlock:
		sseEvent(b, "content_block_start", map[string]any{"type": "content_block_start", "index": i,
			"content_block": map[string]any{"type": wire.TypeCompaction, "content": nil, "encrypted_content": nil}})
		sseEvent(b, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
			"delta": map[string]any{"type": wire.TypeCompactionDelta, "content": v.Content, "encrypted_content": v.EncryptedContent}})
	case map[string]string:
		sseEvent(b, "content_block_start", map[string]any{"type": "content_block_start", "index": i,
			"content_block": map[string]string{"type": "text", "text": ""}})
		sseEvent(b, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
			"delta": map[string]string{"type": "text_delta", "text": v["text"]}})
	}
	sseEvent(b, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
}

func sseEvent(b *bytes.Buffer, name string, data any) {
	d, _ := json.Marshal(data)
	fmt.Fprintf(b, "event: %s\ndata: %s\n\n", name, d)
}

// prependBlock is the response hook that puts a compaction block before
// the upstream's answer: in a JSON message first in content; in a stream
// as block 0 right after message_start, the upstream's blocks moved one
// index up, each event still forwarded as it arrives. Errors and other
// answers pass as they are.
func prependBlock(block wire.CompactionBlock) respHook {
	return func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK {
			return nil
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			resp.Body = &sseShift{src: bufio.NewReader(resp.Body), closer: resp.Body, block: block}
			return nil
		}
		return prependJSON("content", block)(resp)
	}
}

// prependJSON is the response hook that puts v first in the array key of a
// JSON answer (Messages content, Responses output); other answers pass.
func prependJSON(key string, v any) respHook {
	return func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var msg map[string]json.RawMessage
		var list []json.RawMessage
		if json.Unmarshal(body, &msg) == nil && json.Unmarshal(msg[key], &list) == nil {
			b, _ := json.Marshal(v)
			msg[key], _ = json.Marshal(append([]json.RawMessage{b}, list...))
			body, _ = json.Marshal(msg)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
}

// sseShift rewrites a Messages event stream event by event (see
// prependBlock). Each Read returns at most what one upstream event made.
type sseShift struct {
	src    *bufio.Reader
	closer io.Closer
	block  wire.CompactionBlock
	buf    bytes.Buffer
	err    error
}

func (s *sseShift) Read(p []byte) (int, error) {
	for s.buf.Len() == 0 {
		if s.err != nil {
			return 0, s.err
		}
		ev, err := readEvent(s.src)
		if len(ev) > 0 {
			s.rewrite(ev)
		}
		s.err = err
	}
	return s.buf.Read(p)
}

func (s *sseShift) Close() error { return s.closer.Close() }

// readEvent reads one event: lines up to and including a blank line.
func readEvent(r *bufio.Reader) ([]byte, error) {
	var ev []byte
	for {
		line, err := r.ReadBytes('\n')
		ev = append(ev, line...)
		if err != nil || len(bytes.TrimSpace(line)) == 0 && len(bytes.TrimSpace(ev)) > 0 {
			return ev, err
		}
	}
}

// rewrite appends ev to buf: message_start followed by the block's events,
// content block events with their index moved up by one.
func (s *sseShift) rewrite(ev []byte) {
	name, data := eventParts(ev)
	switch name {
	case "message_start":
		s.buf.Write(ev)
		blockEvents(&s.buf, 0, s.block)
		return
	case "content_block_start", "content_block_delta", "content_block_stop":
		var m map[string]json.RawMessage
		var i int
		if json.Unmarshal(data, &m) == nil && json.Unmarshal(m["index"], &i) == nil {
			m["index"] = json.RawMessage(strconv.Itoa(i + 1))
			d, _ := json.Marshal(m)
			fmt.Fprintf(&s.buf, "event: %s\ndata: %s\n\n", name, d)
			return
		}
	}
	s.buf.Write(ev)
}

// eventParts returns an event's name and data.
func eventParts(ev []byte) (string, []byte) {
	var name string
	var data []byte
	for _, line := range bytes.Split(ev, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("event:")); ok {
			name = string(bytes.TrimSpace(v))
		} else if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = bytes.TrimSpace(v)
		}
	}
	return name, data
}

// chainHooks calls each non-nil hook in order (a later one wraps what an
// earlier one left in resp.Body); nil when there is none.
func chainHooks(hooks ...respHook) respHook {
	var hs []respHook
	for _, h := range hooks {
		if h != nil {
			hs = append(hs, h)
		}
	}
	if len(hs) <= 1 {
		if len(hs) == 1 {
			return hs[0]
		}
		return nil
	}
	return func(resp *http.Response) error {
		for _, h := range hs {
			if err := h(resp); err != nil {
				return err
			}
		}
		return nil
	}
}
