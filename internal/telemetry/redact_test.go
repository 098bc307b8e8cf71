package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/telemetry"
)

func TestIsSecretKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"password", true},
		{"nats_password", true},
		{"NATSPassword", true},
		{"token", true},
		{"access_token", true},
		{"X-Api-Key", true},
		{"api_key", true},
		{"apiKey", true},
		{"AnthropicAPIKey", true},
		{"private-key", true},
		{"authorization", true},
		{"Authorization", true},
		{"creds", true},
		{"client_secret", true},
		{"nkey", true},
		{"cookie", true},
		// Not secrets.
		{"key", false},
		{"memory_key", false},
		{"tls_key", false},
		{"input_tokens", false},
		{"tokens", false},
		{"token_count", false},
		{"token_budget", false},
		{"creds_file", false},
		{"tenant", false},
		{"session", false},
		{"url", false},
		{"monkey", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := telemetry.IsSecretKey(tt.key); got != tt.want {
				t.Errorf("IsSecretKey(%q) = %v, want %v", tt.key, got, tt.want)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	const M = telemetry.Masked
	tests := []struct {
		name, in, want string
	}{
		{"anthropic key", "using sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv_wxyz-0123 now", "using " + M + " now"},
		{"openai key", "key=sk-proj-abcdefghijklmnopqrstuv", "key=" + M},
		{"bearer header", "Authorization: Bearer abcdef.ghijkl-mnop", "Authorization: Bearer " + M},
		{"bearer alone", "sent Bearer abcdefghijklmnop to server", "sent Bearer " + M + " to server"},
		{"nats url password", "connecting to nats://recall:hunter22@nats:4222 failed", "connecting to nats://recall:" + M + "@nats:4222 failed"},
		{"query token", "GET /v1/events?token=abc123xyz&tenant=t1", "GET /v1/events?token=" + M + "&tenant=t1"},
		{"query api key", "https://x.example/v1?api_key=abcd1234", "https://x.example/v1?api_key=" + M},
		{"json password", `{"password":"pa55word","user":"u"}`, `{"password":"` + M + `","user":"u"}`},
		{"nkey seed", "seed SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY end", "seed " + M + " end"},
		{"jwt", "jwt eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5In0.eyJqdGkiOiJBQkNERUZHIn0.c2lnbmF0dXJl end", "jwt " + M + " end"},
		// Left alone.
		{"plain", "extraction completed in 3s", "extraction completed in 3s"},
		{"token counts", "input_tokens=1200 output tokens: 300", "input_tokens=1200 output tokens: 300"},
		{"url without password", "nats://nats:4222", "nats://nats:4222"},
		{"short sk", "task-sk-1", "task-sk-1"},
		{"prose bearer", "the token estimation is approximate", "the token estimation is approximate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := telemetry.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

// serviceConfig looks like a service Config as svcmain logs it at start.
type serviceConfig struct {
	NATS natsconn.Config
	provision.Config
	HTTPAddr        string
	AnthropicAPIKey string
	LLM             llmConfig
	Tokens          map[string]string
}

type llmConfig struct {
	Provider string
	APIKey   string `json:"api_key"`
	BaseURL  *url.URL
	Timeout  time.Duration
}

// The secrets below must never appear in log output.
const (
	anthropicKey = "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"
	openaiKey    = "sk-proj-Qq1Ww2Ee3Rr4Tt5Yy6Uu7Ii8"
	natsPassword = "n4ts-pa55-Wo0rd"
	natsToken    = "tok-8f7e6d5c4b3a"
	bearer       = "eyBearerCredential123456"
	urlPassword  = "urlpa55"
	tenantToken  = "tenant-token-value-1"
)

var allSecrets = []string{anthropicKey, openaiKey, natsPassword, natsToken, bearer, urlPassword, tenantToken}

func logEverything(log *slog.Logger) {
	base, _ := url.Parse("https://llm-proxy:" + urlPassword + "@proxy.internal/v1")
	cfg := serviceConfig{
		NATS:            natsconn.Config{URL: "nats://nats:4222", User: "recall", Password: natsPassword, Token: natsToken},
		Config:          provision.Config{Partitions: 16, Replicas: 3},
		HTTPAddr:        ":8080",
		AnthropicAPIKey: anthropicKey,
		LLM:             llmConfig{Provider: "openai", APIKey: openaiKey, BaseURL: base, Timeout: time.Minute},
		Tokens:          map[string]string{"tenant-a": tenantToken},
	}
	ctx := context.Background()
	log.InfoContext(ctx, "starting", "config", cfg, "config_ptr", &cfg)
	log.With("api_key", anthropicKey).InfoContext(ctx, "calling provider", "input_tokens", 1200)
	log.WarnContext(ctx, "request rejected", "authorization", "Bearer "+bearer, "header", "Authorization: Bearer "+bearer)
	log.ErrorContext(ctx, "connect failed", "err", fmt.Errorf("dialing: %w", errors.New("nats://recall:"+natsPassword+"@nats:4222 refused")))
	log.InfoContext(ctx, "llm request to "+base.String()+" with key "+openaiKey)
	log.InfoContext(ctx, "grouped", slog.Group("nats", "password", natsPassword, "url", "nats://nats:4222"))
}

func TestLoggerMasksSecrets(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			logEverything(telemetry.NewLogger(&buf, telemetry.Config{LogFormat: format}))
			out := buf.String()
			for _, s := range allSecrets {
				if strings.Contains(out, s) {
					t.Errorf("secret %q appears in the log:\n%s", s, out)
				}
			}
			for _, want := range []string{telemetry.Masked, "nats://nats:4222", "proxy.internal", "1200", "recall"} {
				if !strings.Contains(out, want) {
					t.Errorf("log lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestLoggerMaskedJSONShape checks the masked configuration still reads like
// the configuration: field names, nested groups, flattened embedded structs.
func TestLoggerMaskedJSONShape(t *testing.T) {
	var buf bytes.Buffer
	logEverything(telemetry.NewLogger(&buf, telemetry.Config{}))
	first, _, _ := strings.Cut(buf.String(), "\n")
	var rec struct {
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal([]byte(first), &rec); err != nil {
		t.Fatalf("decoding %s: %v", first, err)
	}
	c := rec.Config
	if c["Partitions"] != float64(16) || c["HTTPAddr"] != ":8080" || c["AnthropicAPIKey"] != telemetry.Masked {
		t.Errorf("config = %v", c)
	}
	llm, _ := c["LLM"].(map[string]any)
	if llm["api_key"] != telemetry.Masked || llm["Provider"] != "openai" {
		t.Errorf("config.LLM = %v", llm)
	}
	nats, _ := c["NATS"].(map[string]any)
	if nats["password"] != telemetry.Masked || nats["url"] != "nats://nats:4222" {
		t.Errorf("config.NATS = %v", nats)
	}
}

// TestPlainHandlerLeaks shows the test above can fail: the same records
// through a bare JSON handler carry the secrets.
func TestPlainHandlerLeaks(t *testing.T) {
	var buf bytes.Buffer
	logEverything(slog.New(slog.NewJSONHandler(&buf, nil)))
	leaked := 0
	for _, s := range allSecrets {
		if strings.Contains(buf.String(), s) {
			leaked++
		}
	}
	if leaked < len(allSecrets)-1 {
		t.Errorf("only %d of %d secrets leak without redaction; the fixture no longer exercises the handler", leaked, len(allSecrets))
	}
}

func TestRedactKeepsEmptySecrets(t *testing.T) {
	var buf bytes.Buffer
	telemetry.NewLogger(&buf, telemetry.Config{}).Info("cfg", "password", "", "token", "x")
	out := buf.String()
	if !strings.Contains(out, `"password":""`) || !strings.Contains(out, `"token":"`+telemetry.Masked+`"`) {
		t.Errorf("log = %s", out)
	}
}
