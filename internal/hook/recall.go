package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/recallhq/recall/internal/watch"
	"github.com/recallhq/recall/pkg/events"
)

// errNotFound is a 404 from Recall: nothing to add.
var errNotFound = errors.New("not found")

// userMemory returns the user's long-term memory context block; none for
// no user or no memory yet.
func userMemory(ctx context.Context, cfg Config) (string, error) {
	if cfg.User == "" {
		cfg.Log.Info("hook: no user (--user, RECALL_USER): no long-term memory to add")
		return "", nil
	}
	var reply events.LTMReply
	err := call(ctx, cfg, http.MethodGet, "/v1/users/"+url.PathEscape(cfg.User)+"/memory", nil, &reply)
	if errors.Is(err, errNotFound) {
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
	var reply events.ResolveReply
	err := call(ctx, cfg, http.MethodPost, "/v1/resolve", events.ResolveRequest{Text: prompt, Answer: true}, &reply)
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

// call sends one JSON request to Recall's edge (body nil: none) and
// decodes a 200 answer into out.
func call(ctx context.Context, cfg Config, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	base := cfg.Client.URL
	if base == "" {
		base = watch.DefaultURL
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+path, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cfg.Client.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Client.Token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusNotFound {
		return errNotFound
	}
	if resp.StatusCode != http.StatusOK {
		var p struct{ Detail string }
		json.Unmarshal(b, &p)
		return fmt.Errorf("%s: %s", resp.Status, p.Detail)
	}
	return json.Unmarshal(b, out)
}
