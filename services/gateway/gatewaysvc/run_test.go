package gatewaysvc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/services/gateway/gatewaytest"
)

// TestRunForwardsWithoutNATSAndStopsCleanly: with no NATS server to reach,
// Run serves at once and forwards; a stop returns nil.
func TestRunForwardsWithoutNATSAndStopsCleanly(t *testing.T) {
	up := httptest.NewServer(gatewaytest.New(gatewaytest.Script{}))
	defer up.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	cfg := Config{Addr: addr, AnthropicURL: up.URL, OpenAIURL: up.URL,
		NATS: natsconn.Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t))}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	var status int
	testpoll.Until(t, 10*time.Second, "the gateway forwards", func() bool {
		resp, err := http.Post("http://"+addr+"/anthropic/v1/messages", "application/json",
			strings.NewReader(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			return false
		}
		resp.Body.Close()
		status = resp.StatusCode
		return true
	})
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
