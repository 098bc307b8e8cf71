package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/store"
)

// lastMsg is key's newest message in bucket (nil: none, or deleted).
func (m *Migrator) lastMsg(ctx context.Context, bucket, key string) (*jetstream.RawStreamMsg, error) {
	s, err := m.handle(ctx, "KV_"+bucket)
	if err != nil {
		return nil, err
	}
	raw, err := s.GetLastMsgForSubject(ctx, "$KV."+bucket+"."+key)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s.%s: %w", bucket, key, err)
	}
	return raw, nil
}

// handle is a stream's handle for per-record reads and writes, looked up
// once.
func (m *Migrator) handle(ctx context.Context, name string) (jetstream.Stream, error) {
	if s, ok := m.streams[name]; ok {
		return s, nil
	}
	s, err := m.js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("opening stream %s: %w", name, err)
	}
	if m.streams == nil {
		m.streams = map[string]jetstream.Stream{}
	}
	m.streams[name] = s
	return s, nil
}

// putKV writes doc to key if the key's last revision is expect (0: the
// key has no message), marked HeaderTranslated: marker.
func (m *Migrator) putKV(ctx context.Context, bucket, key string, doc map[string]json.RawMessage, marker string, expect uint64) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding %s.%s: %w", bucket, key, err)
	}
	msg := nats.NewMsg(store.PutSubject(m.js, bucket, key))
	msg.Data = b
	msg.Header.Set(HeaderTranslated, marker)
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expect, 10))
	_, err = m.js.PublishMsg(ctx, msg)
	if store.IsConflict(err) {
		return fmt.Errorf("%s.%s: %w (%w)", bucket, key, errChanged, err)
	}
	if err != nil {
		return fmt.Errorf("writing %s.%s: %w", bucket, key, err)
	}
	return nil
}

// deleteKV deletes key if its last revision is rev.
func (m *Migrator) deleteKV(ctx context.Context, bucket, key string, rev uint64) error {
	kv, err := m.js.KeyValue(ctx, bucket)
	if err != nil {
		return fmt.Errorf("opening %s: %w", bucket, err)
	}
	if err := kv.Delete(ctx, key, jetstream.LastRevision(rev)); err != nil {
		return fmt.Errorf("deleting %s.%s: %w", bucket, key, err)
	}
	return nil
}

// moveKV writes it's translated document under key, then deletes the old
// key. The new key's marker names the old key, so a rerun after a kill
// between the two recognises its own write; a key another record was
// translated to already holds the same work (the same session and
// position), and the old record is dropped.
func (m *Migrator) moveKV(ctx context.Context, it *kvItem, doc map[string]json.RawMessage, key string) error {
	bucket := it.spec.bucket
	cur, err := m.lastMsg(ctx, bucket, key)
	if err != nil {
		return err
	}
	var expect uint64
	switch {
	case cur == nil:
	case cur.Header.Get("KV-Operation") != "":
		expect = cur.Sequence
	case cur.Header.Get(HeaderTranslated) == it.key:
		m.rep.Translated[bucket]++
		return m.deleteKV(ctx, bucket, it.key, it.rev)
	case cur.Header.Get(HeaderTranslated) != "":
		m.log.Warn("dropped a record translated to the key of another", "bucket", bucket, "key", it.key, "kept", key)
		m.rep.Dropped[bucket]++
		return m.deleteKV(ctx, bucket, it.key, it.rev)
	default:
		return fmt.Errorf("%s.%s translates to %s, which exists and was not translated: %w; move one of them aside and run the migration again", bucket, it.key, key, errChanged)
	}
	if err := m.putKV(ctx, bucket, key, doc, it.key, expect); err != nil {
		return err
	}
	m.rep.Translated[bucket]++
	return m.deleteKV(ctx, bucket, it.key, it.rev)
}

// purgeCaches empties the kvCaches buckets.
func (m *Migrator) purgeCaches(ctx context.Context) error {
	for _, b := range kvCaches {
		s, err := m.js.Stream(ctx, "KV_"+b)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("opening %s: %w", b, err)
		}
		n := s.CachedInfo().State.Msgs
		if n == 0 {
			continue
		}
		if err := s.Purge(ctx); err != nil {
			return fmt.Errorf("emptying %s: %w", b, err)
		}
		m.rep.Purged[b] += n
	}
	return nil
}

// decodeDoc decodes a JSON object keeping every member as it is.
func decodeDoc(b []byte) (map[string]json.RawMessage, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, errors.New("not a JSON object")
	}
	return doc, nil
}

// getPath reads the unsigned number at path (missing: 0).
func getPath(doc map[string]json.RawMessage, path []string) (uint64, error) {
	raw, ok := doc[path[0]]
	if !ok || string(raw) == "null" {
		return 0, nil
	}
	if len(path) > 1 {
		sub, err := decodeDoc(raw)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path[0], err)
		}
		return getPath(sub, path[1:])
	}
	var v uint64
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, fmt.Errorf("%s: %w", path[0], err)
	}
	return v, nil
}

// setPath writes v at path, creating nothing but the last member.
func setPath(doc map[string]json.RawMessage, path []string, v uint64) error {
	if len(path) == 1 {
		doc[path[0]] = json.RawMessage(strconv.FormatUint(v, 10))
		return nil
	}
	sub, err := decodeDoc(doc[path[0]])
	if err != nil {
		return fmt.Errorf("%s: %w", path[0], err)
	}
	if err := setPath(sub, path[1:], v); err != nil {
		return err
	}
	b, err := json.Marshal(sub)
	if err != nil {
		return err
	}
	doc[path[0]] = b
	return nil
}
