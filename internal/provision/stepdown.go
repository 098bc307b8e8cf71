package provision

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/retry"
)

// The balancer's requests that nats.go has no call for (a stepdown with a
// preferred placement; a consumer list that says which consumers did not
// answer) go to the JetStream API through apiRequest.

// apiError is the error of a JetStream API answer.
type apiError struct {
	Code        int    `json:"code"`
	Description string `json:"description"`
}

// makeMoves asks for every move, then waits for the elections of those
// asked for without error (waitElected). It returns the first request's
// error, after trying every move.
func makeMoves(ctx context.Context, js jetstream.JetStream, moves []LeaderMove) error {
	var first error
	var made []LeaderMove
	for _, m := range moves {
		if err := stepDown(ctx, js, m); err != nil {
			first = cmp.Or(first, err)
			continue
		}
		made = append(made, m)
	}
	waitElected(ctx, js, made)
	return first
}

// stepDown asks the leader of m's stream, or of its consumer, to step down
// in favour of m.To, waiting at most AttemptTimeout for the answer.
func stepDown(ctx context.Context, js jetstream.JetStream, m LeaderMove) error {
	subject := "STREAM.LEADER.STEPDOWN." + m.Stream
	if m.Consumer != "" {
		subject = "CONSUMER.LEADER.STEPDOWN." + m.Stream + "." + m.Consumer
	}
	req := map[string]any{"placement": map[string]string{"preferred": m.To}}
	var resp struct {
		Success bool      `json:"success"`
		Error   *apiError `json:"error"`
	}
	if err := apiRequest(ctx, js, subject, req, &resp); err != nil {
		return fmt.Errorf("asking %s's leader %s to step down for %s: %w", m.what(), m.From, m.To, err)
	}
	if resp.Error != nil || !resp.Success {
		desc := "no success"
		if resp.Error != nil {
			desc = resp.Error.Description
		}
		return fmt.Errorf("%s's leader %s did not step down for %s: %s", m.what(), m.From, m.To, desc)
	}
	return nil
}

// electionPoll bounds one info request while waitElected waits for an
// election (a request sent while a group has no leader is never answered).
const electionPoll = 250 * time.Millisecond

// electionWait is waitElected's poll: a leader asked for every 50 ms.
var electionWait = retry.Policy{First: electionPoll / 5, Max: electionPoll / 5}

// errNotElected: the moved group has no new leader yet.
var errNotElected = errors.New("no new leader yet")

// waitElected returns once every moved group has a leader other than the
// one that stepped down, or after AttemptTimeout (the old leader may win
// the election again), or when ctx ends: the caller's next requests to
// those streams and consumers then find a leader instead of waiting out a
// timeout.
func waitElected(ctx context.Context, js jetstream.JetStream, moves []LeaderMove) {
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	for _, m := range moves {
		_ = electionWait.Do(ctx, nil, "", func(ctx context.Context) error {
			if l := leaderOf(ctx, js, m); l != "" && l != m.From {
				return nil
			}
			return errNotElected
		})
	}
}

// leaderOf is the current leader of m's stream or consumer, "" when it
// has none or does not answer within electionPoll.
func leaderOf(ctx context.Context, js jetstream.JetStream, m LeaderMove) string {
	ctx, cancel := context.WithTimeout(ctx, electionPoll)
	defer cancel()
	subject := "STREAM.INFO." + m.Stream
	if m.Consumer != "" {
		subject = "CONSUMER.INFO." + m.Stream + "." + m.Consumer
	}
	var info struct {
		Cluster *jetstream.ClusterInfo `json:"cluster"`
	}
	if err := apiRequest(ctx, js, subject, nil, &info); err != nil || info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

// apiRequest sends req (JSON; nil: an empty body) to the JetStream API
// subject (after the API prefix js uses) and decodes the answer into resp,
// waiting at most AttemptTimeout.
func apiRequest(ctx context.Context, js jetstream.JetStream, subject string, req, resp any) error {
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	var body []byte
	if req != nil {
		var err error
		if body, err = json.Marshal(req); err != nil {
			return err
		}
	}
	msg, err := js.Conn().RequestWithContext(ctx, apiPrefix(js)+subject, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(msg.Data, resp); err != nil {
		return fmt.Errorf("reading the answer to %s: %w", subject, err)
	}
	return nil
}

// apiPrefix is the JetStream API subject prefix js sends requests to.
func apiPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	}
	return jetstream.DefaultAPIPrefix
}
