package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/indexer/indexersvc"
	"github.com/recallhq/recall/services/longterm/longtermsvc"
)

// fullStack is the pipeline plus the indexer and long-term memory, all
// on the offline model.
type fullStack struct {
	*pipeline
	js jetstream.JetStream
}

func startFullStack(t *testing.T) *fullStack {
	t.Helper()
	p, srv := startPipeline(t)
	nc, js := srv.Connect(t)
	ncfg, prov := natsconn.Config{URL: srv.ClientURL()}, provision.Config{Partitions: 4}
	log := telemetry.NewLogger(io.Discard, telemetry.Config{LogLevel: "error"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() {
		_ = indexersvc.Run(ctx, indexersvc.Config{NATS: ncfg, Config: prov, Provider: llm.NewOffline(), Timeout: 20 * time.Second, ReindexWait: 20 * time.Second}, log)
		done <- struct{}{}
	}()
	go func() {
		_ = longtermsvc.Run(ctx, longtermsvc.Config{NATS: ncfg, Config: prov, Provider: llm.NewOffline(), ID: "lt-1",
			HeartbeatTTL: 2 * time.Second, Timeout: 20 * time.Second, CommitWait: 20 * time.Second}, log)
		done <- struct{}{}
	}()
	t.Cleanup(func() { cancel(); <-done; <-done })
	for _, name := range []string{indexersvc.ServiceName, longtermsvc.ServiceName} {
		testpoll.Until(t, 20*time.Second, name+" answers discovery", func() bool {
			_, err := nc.Request("$SRV.PING."+name, nil, 200*time.Millisecond)
			return err == nil
		})
	}
	return &fullStack{pipeline: p, js: js}
}

// markerSeqs walks every message of every stream and bucket Recall
// provisions — KV history and object chunks included — reading each by
// sequence (Direct Get where the stream allows it) and returns, by
// stream, the sequences whose data or headers hold marker.
func markerSeqs(t *testing.T, js jetstream.JetStream, marker string) map[string][]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	found := map[string][]uint64{}
	for _, name := range provision.Names(provision.Config{Partitions: 4}) {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				t.Fatalf("%s #%d: %v", name, seq, err)
			}
			if holds(m, marker) {
				found[name] = append(found[name], seq)
			}
		}
	}
	return found
}

func holds(m *jetstream.RawStreamMsg, marker string) bool {
	if bytes.Contains(m.Data, []byte(marker)) {
		return true
	}
	for _, vs := range m.Header {
		for _, v := range vs {
			if strings.Contains(v, marker) {
				return true
			}
		}
	}
	return false
}

// gone checks that none of the old sequences can be read any more.
func gone(t *testing.T, js jetstream.JetStream, old map[string][]uint64) {
	t.Helper()
	ctx := context.Background()
	for name, seqs := range old {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, seq := range seqs {
			if m, err := s.GetMsg(ctx, seq); !errors.Is(err, jetstream.ErrMsgNotFound) {
				t.Errorf("%s #%d still reads (%v): %.80q", name, seq, err, m.Data)
			}
		}
	}
}

// call sends an HTTP request to the edge and returns the status and body.
func call(t *testing.T, method, url string, body []byte) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	if body != nil {
		req.Header.Set("Content-Type", "application/cloudevents-batch+json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// eraseSession erases over HTTP and returns the receipt.
func eraseSession(t *testing.T, url, session string) events.EraseReceipt {
	t.Helper()
	status, body := call(t, "DELETE", url+"/v1/sessions/"+session, nil)
	var r events.EraseReceipt
	if status != http.StatusOK || json.Unmarshal(body, &r) != nil {
		t.Fatalf("DELETE /v1/sessions/%s: %d %s", session, status, body)
	}
	return r
}

// seedStates writes what the pipeline writes only on rare paths, with
// marker in it: a parked extraction request, a trigger snapshot, a
// running extraction's status and a parked long-term commit.
func seedStates(t *testing.T, js jetstream.JetStream, session, marker string) {
	t.Helper()
	ctx := context.Background()
	key := events.MemoryKey("default", session)
	for bucket, k := range map[string]string{
		events.BucketParked:       key + ".99",
		events.BucketTriggerState: key,
		events.BucketLTMState:     events.ParkedCommitKey("default", session, 5),
	} {
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, k, []byte(`{"note":"`+marker+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, "$KV."+events.BucketStatus+"."+key, []byte(`{"note":"`+marker+`"}`), jetstream.WithMsgTTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
}
