package llm

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/recallhq/recall/internal/envconf"
)

// Provider kinds.
const (
	KindAnthropic = "anthropic"
	KindOpenAI    = "openai"
	KindOffline   = "offline"
)

// Config selects and configures the provider (environment variables
// RECALL_LLM_*, RECALL_ANTHROPIC_API_KEY, RECALL_OPENAI_API_KEY). Embed it
// anonymously in a service Config so the variable names stay as documented.
//
// envconfig falls back to the unprefixed name of every tagged field, so
// ANTHROPIC_API_KEY and OPENAI_API_KEY are accepted when the RECALL_ ones are
// unset.
type Config struct {
	Provider        string        `envconfig:"LLM_PROVIDER" desc:"anthropic, openai, offline, or empty to pick by configured key (offline when none)"`
	Model           string        `envconfig:"LLM_MODEL" desc:"model name; empty uses the provider's default"`
	BaseURL         string        `envconfig:"LLM_BASE_URL" desc:"API base URL (OpenAI-compatible servers: vLLM, Ollama, llama.cpp, LiteLLM)"`
	AnthropicAPIKey string        `envconfig:"ANTHROPIC_API_KEY" secret:"true" desc:"Anthropic API key (secret; ANTHROPIC_API_KEY is used when unset)"`
	OpenAIAPIKey    string        `envconfig:"OPENAI_API_KEY" secret:"true" desc:"OpenAI API key (secret; OPENAI_API_KEY is used when unset)"`
	MaxTokens       int           `envconfig:"LLM_MAX_TOKENS" default:"8192" desc:"most output tokens per model call"`
	Timeout         time.Duration `envconfig:"LLM_TIMEOUT" default:"120s" desc:"time limit of one model call"`
	RetryAttempts   int           `envconfig:"LLM_RETRY_ATTEMPTS" default:"4" desc:"attempts per model call on transport errors, 429 and 5xx"`
	RetryBaseDelay  time.Duration `envconfig:"LLM_RETRY_BASE_DELAY" default:"500ms" desc:"first retry delay; doubles per attempt, with jitter"`
	RetryMaxDelay   time.Duration `envconfig:"LLM_RETRY_MAX_DELAY" default:"20s" desc:"longest retry delay"`
}

// LogValue masks the API keys.
func (c Config) LogValue() slog.Value { return envconf.LogValue(c) }

// New builds the configured provider, wrapped with WithRetry per the retry
// settings. With Provider empty it picks anthropic when an Anthropic key is
// set, else openai when an OpenAI key or a base URL is set, else offline —
// and logs that choice. An unknown provider, or anthropic without a key, is
// an error (openai without a key is allowed: local servers need none).
func New(cfg Config, log *slog.Logger) (Provider, error) {
	kind := strings.ToLower(strings.TrimSpace(cfg.Provider))
	if kind == "" {
		switch {
		case cfg.AnthropicAPIKey != "":
			kind = KindAnthropic
		case cfg.OpenAIAPIKey != "" || cfg.BaseURL != "":
			kind = KindOpenAI
		default:
			kind = KindOffline
			log.Info("no LLM API key configured: using the offline provider (deterministic extraction, no model calls); set RECALL_ANTHROPIC_API_KEY or RECALL_OPENAI_API_KEY to use a model")
		}
	}
	opts := ClientOptions{Model: cfg.Model, BaseURL: cfg.BaseURL, MaxTokens: cfg.MaxTokens, Timeout: cfg.Timeout}
	var p Provider
	switch kind {
	case KindAnthropic:
		if cfg.AnthropicAPIKey == "" {
			return nil, fmt.Errorf("creating llm provider: %w: anthropic needs RECALL_ANTHROPIC_API_KEY", ErrConfig)
		}
		opts.APIKey = cfg.AnthropicAPIKey
		p = NewAnthropic(opts)
	case KindOpenAI:
		opts.APIKey = cfg.OpenAIAPIKey
		if opts.APIKey == "" {
			opts.APIKey = "none" // local OpenAI-compatible servers ignore it
		}
		p = NewOpenAI(opts)
	case KindOffline:
		return NewOffline(), nil
	default:
		return nil, fmt.Errorf("creating llm provider: %w: unknown provider %q (anthropic, openai, offline)", ErrConfig, cfg.Provider)
	}
	log.Info("llm provider", "provider", p.Name(), "model", p.Model())
	return WithRetry(p, RetryPolicy{
		Attempts:  cfg.RetryAttempts,
		BaseDelay: cfg.RetryBaseDelay,
		MaxDelay:  cfg.RetryMaxDelay,
		OnRetry: func(attempt int, err error) {
			log.Warn("llm call failed, retrying", "provider", p.Name(), "attempt", attempt, "err", err)
		},
	}), nil
}

// ErrConfig marks an invalid provider configuration.
var ErrConfig = errors.New("invalid llm configuration")
