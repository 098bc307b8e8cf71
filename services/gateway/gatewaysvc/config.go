package gatewaysvc

import (
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/recallhq/recall/internal/envconf"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
)

// Config configures the gateway (environment variables RECALL_*). Zero
// values take the defaults of their tags (internal/envconf).
type Config struct {
	NATS natsconn.Config
	provision.Config

	Addr         string `envconfig:"GATEWAY_ADDR" default:"127.0.0.1:8090" desc:"listen address of the model gateway (/anthropic/v1/*, /openai/v1/*)"`
	AnthropicURL string `envconfig:"GATEWAY_ANTHROPIC_URL" default:"https://api.anthropic.com" desc:"upstream of /anthropic/*: /anthropic/v1/messages goes to <url>/v1/messages"`
	OpenAIURL    string `envconfig:"GATEWAY_OPENAI_URL" default:"https://api.openai.com" desc:"upstream of /openai/*: /openai/v1/responses goes to <url>/v1/responses"`
	OpsAddr      string `envconfig:"GATEWAY_OPS_ADDR" desc:"listen address of /healthz /readyz /metrics (empty = off)"`
	// Tenants is the ingest edge's token list: with tenants, a request
	// needs a Recall token in x-recall-token.
	Tenants string `envconfig:"TENANTS" secret:"true" desc:"bearer tokens per tenant as tenant:sha256(token) hex, comma separated; the gateway takes a token in x-recall-token (secret)"`

	MaxBodyBytes      int64         `envconfig:"GATEWAY_MAX_BODY_BYTES" default:"33554432" desc:"largest request body read (larger: 413 in the provider's error shape)"`
	LargeBodyBytes    int64         `envconfig:"GATEWAY_LARGE_BODY_BYTES" default:"1048576" desc:"bodies larger than this take the large-body lane of admission"`
	MaxRequests       int           `envconfig:"GATEWAY_MAX_REQUESTS" default:"1024" desc:"requests with a small body handled at once; more get a 503 (overloaded) answer"`
	TenantRequests    int           `envconfig:"GATEWAY_TENANT_REQUESTS" default:"256" desc:"requests with a small body of one tenant handled at once; more get a 429"`
	MaxLargeBodies    int           `envconfig:"GATEWAY_MAX_LARGE_BODIES" default:"16" desc:"requests with a large body handled at once (bounds the memory bodies take)"`
	TenantLargeBodies int           `envconfig:"GATEWAY_TENANT_LARGE_BODIES" default:"4" desc:"requests with a large body of one tenant handled at once"`
	CaptureQueue      int           `envconfig:"GATEWAY_CAPTURE_QUEUE" default:"1024" desc:"exchanges waiting to be captured; more are not captured now (the next request of the session captures them)"`
	RecallTimeout     time.Duration `envconfig:"GATEWAY_RECALL_TIMEOUT" default:"2s" desc:"longest wait for Recall (compaction, state) on a request's path before it is forwarded unchanged"`
	UpstreamTimeout   time.Duration `envconfig:"GATEWAY_UPSTREAM_HEADER_TIMEOUT" default:"10m" desc:"longest wait for the upstream's response headers"`
	ShutdownGrace     time.Duration `envconfig:"GATEWAY_SHUTDOWN_GRACE" default:"30s" desc:"at stop, how long requests in flight (streams) may finish"`
}

// LogValue masks secrets.
func (c Config) LogValue() slog.Value { return envconf.LogValue(c) }

// withDefaults fills unset values from their tags.
func (c Config) withDefaults() Config {
	envconf.Defaults(&c)
	return c
}

// upstreams parses the upstream URLs.
func (c Config) upstreams() (anthropic, openai *url.URL, err error) {
	if anthropic, err = parseUpstream(c.AnthropicURL, "RECALL_GATEWAY_ANTHROPIC_URL"); err != nil {
		return nil, nil, err
	}
	if openai, err = parseUpstream(c.OpenAIURL, "RECALL_GATEWAY_OPENAI_URL"); err != nil {
		return nil, nil, err
	}
	return anthropic, openai, nil
}

func parseUpstream(s, name string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s must be an http(s) URL such as https://api.anthropic.com, not %q", name, s)
	}
	return u, nil
}
