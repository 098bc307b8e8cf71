package reliability

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/llm/llmtest"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// TestNoSecretsInLogsOrEvents runs the pipeline with every kind of secret
// configured — a NATS password, an LLM API key, tenant bearer tokens — and
// with failures that tempt code into echoing them (a wrong token, model API
// errors), then searches every log line, every lifecycle event, the stored
// transcript headers and the HTTP error bodies for the secrets.
func TestNoSecretsInLogsOrEvents(t *testing.T) {
	const natsPassword = "nats-PW-9f8e7d6c5b4a"
	const wrongToken = "tok-WRONG-c0ffee-5ec12e7"
	h := newHarnessWith(t, &server.Options{Username: "recall", Password: natsPassword},
		natsconn.Config{User: "recall", Password: natsPassword})

	fake := llmtest.NewAnthropic(t)
	const desc = "_What is actively being worked on right now? Pending tasks not yet completed. Immediate next steps._"
	edit, _ := json.Marshal(map[string]string{"file_path": memory.NotesPath(tenantA, "sec"), "old_string": desc, "new_string": desc + "\nworking"})
	fake.SetResponder(func(call int, _ []byte) llmtest.Reply {
		switch call % 3 {
		case 0:
			return llmtest.Reply{Status: 500}
		case 1:
			return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "Edit", Input: string(edit)}}}
		}
		return llmtest.Reply{Text: "done"}
	})
	h.TweakExtractor = func(c *extractorsvc.Config) {
		c.Provider = nil
		c.LLMConfig = llm.Config{Provider: llm.KindAnthropic, BaseURL: fake.BaseURL(), AnthropicAPIKey: fakeAPIKey,
			Timeout: 5 * time.Second, RetryAttempts: 3, RetryBaseDelay: 10 * time.Millisecond, RetryMaxDelay: 50 * time.Millisecond}
	}
	h.TweakTrigger = func(c *triggersvc.Config) { c.MinTokensToInit, c.MinTokensBetweenUpdate = 500, 500 }
	h.startTrigger()
	h.startExtractor()
	h.startCompactor()
	base := h.startIngest()

	var bodies []string
	for i := 0; i < 20; i++ {
		st, b := httpDo(t, "POST", base+"/v1/events", tokenA, "application/cloudevents+json", structured(t, transcriptEvent(tenantA, "sec", i, 400)))
		if st != 202 {
			t.Fatalf("event %d: %d %s", i, st, b)
		}
	}
	for _, tok := range []string{wrongToken, "Bearer " + wrongToken, tokenA + " " + wrongToken} {
		st, b := httpDo(t, "POST", base+"/v1/events", tok, "application/cloudevents+json", structured(t, transcriptEvent(tenantA, "sec", 99, 10)))
		if st != 401 {
			t.Fatalf("wrong token: %d", st)
		}
		bodies = append(bodies, string(b))
		_, b = httpDo(t, "GET", base+"/v1/sessions/sec/memory", tok, "", nil)
		bodies = append(bodies, string(b))
	}
	res, err := manualExtract(h, tenantA, "sec", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success {
		t.Fatalf("extraction: %+v", res)
	}
	_, b := httpDo(t, "POST", base+"/v1/sessions/sec/compact", tokenA, "application/json", []byte(`{}`))
	bodies = append(bodies, string(b))
	if fake.Calls() < 2 {
		t.Fatalf("the model API was called %d times", fake.Calls())
	}

	secrets := map[string]string{"NATS password": natsPassword, "LLM API key": fakeAPIKey, "tenant A token": tokenA,
		"tenant B token": tokenB, "wrong token": wrongToken}
	check := func(where, text string) {
		for name, s := range secrets {
			if i := strings.Index(text, s); i >= 0 {
				t.Errorf("%s holds the %s: ...%s...", where, name, text[max(0, i-80):min(len(text), i+len(s)+20)])
			}
		}
	}
	// Give the services' last log lines (failures, shutdown) a chance.
	h.stopAll()
	logs := h.logs.String()
	if !strings.Contains(logs, `"msg":"starting"`) || !strings.Contains(logs, "password") {
		t.Fatal("the configurations were not logged: the check would prove nothing")
	}
	check("the service logs", logs)
	for i, b := range bodies {
		check("HTTP response "+string(rune('0'+i)), b)
	}
	// The notifications, and the transcript: every shard stream.
	searched := map[string]int{}
	for _, stream := range append([]string{events.StreamEvents}, h.prov.Layout().Streams()...) {
		part := "the transcript"
		if stream == events.StreamEvents {
			part = stream
		}
		forEachMsg(t, h.js, stream, func(subject string, hdr map[string][]string, data []byte) {
			searched[part]++
			hb, _ := json.Marshal(hdr)
			check(stream+" message on "+subject, subject+string(hb)+string(data))
		})
	}
	for _, part := range []string{events.StreamEvents, "the transcript"} {
		if searched[part] == 0 {
			t.Errorf("%s is empty: the check would prove nothing", part)
		}
	}
	t.Logf("searched %d bytes of logs, %d HTTP bodies and the event and transcript streams for %d secrets; model calls %d",
		len(logs), len(bodies), len(secrets), fake.Calls())
}

// forEachMsg calls fn for every message of stream.
func forEachMsg(t *testing.T, js jetstream.JetStream, stream string, fn func(subject string, hdr map[string][]string, data []byte)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for left := info.NumPending; left > 0; {
		batch, err := cons.Fetch(int(min(left, 500)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			left--
			fn(m.Subject(), m.Headers(), m.Data())
		}
		if got == 0 {
			t.Fatalf("%s: %d messages left but none delivered", stream, left)
		}
	}
}
