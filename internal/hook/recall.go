package hook

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// userMemory returns the user's long-term memory context block; none for
// no user or no memory yet.
func userMemory(ctx context.Context, cfg Config) (string, error) {
	if cfg.User == "" {
		cfg.Log.Info("hook: no user (--user, RECALL_USER): no long-term memory to add")
		return "", nil
	}
	reply, err := cfg.Client.UserMemory(ctx, cfg.User)
	if client.Status(err) == http.StatusNotFound {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s's long-term memory: %w", cfg.User, err)
	}
	return reply.Context, nil
}

// references resolves the prompt's @@references and returns the text of
// their context message; none when the prompt has none.
func references(ctx context.Context, cfg Config, prompt string) (string, error) {
	if !strings.Contains(prompt, "@@") {
		return "", nil
	}
	reply, err := cfg.Client.References(ctx, prompt, true)
	if err != nil {
		return "", fmt.Errorf("resolving the prompt's @@references: %w", err)
	}
	if reply.Context == nil {
		return "", nil
	}
	var parts []string
	for _, b := range reply.Context.Content {
		if b.Type == events.BlockText && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n\n"), nil
}
