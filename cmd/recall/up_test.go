package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/services/gateway/gatewaytest"
	"github.com/recallhq/recall/services/stack"
)

// syncBuffer is a strings.Builder safe for a writer and a reader in two
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// recall up takes its HTTP address from RECALL_HTTP_ADDR, binds port 0 to
// free ports and prints them with the exports to run next, keeps the
// services' logs out of the banner, and a second up on the same data
// directory or HTTP address fails at once.
func TestUpPortsLockAndBanner(t *testing.T) {
	t.Setenv("RECALL_HTTP_ADDR", "127.0.0.1:0")
	t.Setenv("RECALL_GATEWAY_ADDR", "127.0.0.1:0")
	upstream := httptest.NewServer(gatewaytest.New(gatewaytest.Script{}))
	defer upstream.Close()
	t.Setenv("RECALL_GATEWAY_ANTHROPIC_URL", upstream.URL)
	data := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	errc := make(chan error, 1)
	go func() { errc <- runUp(ctx, []string{"--data", data, "--nats-listen", "127.0.0.1:0"}, &out) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("up: %v", err)
		}
	}()
	testpoll.Until(t, 60*time.Second, "the banner", func() bool {
		select {
		case err := <-errc:
			t.Fatalf("up stopped: %v\n%s", err, out.String())
		default:
		}
		return strings.Contains(out.String(), "Press Ctrl-C")
	})
	banner := out.String()
	for _, bad := range []string{":4222", ":8080", ":0 ", `"level"`} {
		if strings.Contains(banner, bad) {
			t.Errorf("banner has %q:\n%s", bad, banner)
		}
	}
	for _, want := range []string{"export RECALL_NATS_URL=nats://127.0.0.1:", " RECALL_URL=http://127.0.0.1:", "recall.log", "gateway:   http://127.0.0.1:"} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}
	if lines := strings.Count(banner, "\n"); lines > 15 {
		t.Errorf("banner of %d lines:\n%s", lines, banner)
	}
	checkGatewayForwards(t, strings.Fields(banner[strings.Index(banner, "gateway:"):])[1])
	start := time.Now()
	err := runUp(context.Background(), []string{"--data", data, "--nats-listen", "127.0.0.1:0"}, &strings.Builder{})
	if !errors.Is(err, stack.ErrDataDirInUse) {
		t.Fatalf("second up on the same data: %v", err)
	}
	http := strings.Fields(banner[strings.Index(banner, "HTTP edge:"):])[2]
	err = runUp(context.Background(), []string{"--data", t.TempDir(), "--http", strings.TrimPrefix(http, "http://"), "--nats-listen", "127.0.0.1:0"}, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "cannot listen on") {
		t.Fatalf("second up on the same HTTP address: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the refusals took %v", d)
	}
}

// checkGatewayForwards sends a Messages request through the gateway at url
// and expects the scripted upstream's answer.
func checkGatewayForwards(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Post(url+"/anthropic/v1/messages", "application/json",
		strings.NewReader(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Done.") {
		t.Fatalf("through the gateway: %d %s", resp.StatusCode, body)
	}
}
