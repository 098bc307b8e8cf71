package export

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
)

// UserDocument is one long-term memory document of a user.
type UserDocument struct {
	// Target is "self" or "peer/<peer>".
	Target    string    `json:"target"`
	Type      string    `json:"type"`
	Content   string    `json:"content"`
	Revision  uint64    `json:"revision"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Session is the session that wrote the document last.
	Session string `json:"session,omitempty"`
}

// UserExport is a user's long-term memory.
type UserExport struct {
	Tenant    string         `json:"tenant"`
	User      string         `json:"user"`
	Documents []UserDocument `json:"documents"`
}

// User reads every long-term memory document of the user (self and
// peers, current revisions), sorted by target and type; a user without
// any is ErrNotFound.
func User(ctx context.Context, js jetstream.JetStream, tenant, user string) (UserExport, error) {
	out := UserExport{Tenant: tenant, User: user, Documents: []UserDocument{}}
	kv, err := js.KeyValue(ctx, events.BucketLTM)
	if err != nil {
		return out, fmt.Errorf("opening %s: %w", events.BucketLTM, err)
	}
	prefix := tenant + "." + user + "."
	w, err := kv.WatchFiltered(ctx, []string{prefix + ">"}, jetstream.IgnoreDeletes())
	if err != nil {
		return out, fmt.Errorf("reading long-term memory: %w", err)
	}
	defer func() { _ = w.Stop() }()
	for v := range w.Updates() {
		if v == nil {
			break
		}
		var d events.StoredMemoryDocument
		if err := json.Unmarshal(v.Value(), &d); err != nil {
			return out, fmt.Errorf("decoding %s: %w", v.Key(), err)
		}
		target, typ := splitLTMKey(strings.TrimPrefix(v.Key(), prefix))
		out.Documents = append(out.Documents, UserDocument{Target: target, Type: typ, Content: d.Content,
			Revision: v.Revision(), UpdatedAt: d.UpdatedAt, Session: d.Session})
	}
	if err := ctx.Err(); err != nil {
		return out, err
	}
	if len(out.Documents) == 0 {
		return out, ErrNotFound
	}
	sort.Slice(out.Documents, func(i, j int) bool {
		a, b := out.Documents[i], out.Documents[j]
		return a.Target < b.Target || (a.Target == b.Target && a.Type < b.Type)
	})
	return out, nil
}

// splitLTMKey splits the part of an events.LTMKey after <tenant>.<user>.:
// self.<type> or peer.<peer>.<type>.
func splitLTMKey(rest string) (target, typ string) {
	if t, ok := strings.CutPrefix(rest, "self."); ok {
		return "self", t
	}
	if r, ok := strings.CutPrefix(rest, "peer."); ok {
		peer, t, _ := strings.Cut(r, ".")
		return "peer/" + peer, t
	}
	return rest, ""
}
