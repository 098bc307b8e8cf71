package parked

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// TestParkedCommitsListAndReplay: parked commits are listed oldest first,
// apart from parked extractions; a replay re-queues the matching ones on
// RECALL_COMMITS for their user (reason replay) and unparks them.
func TestParkedCommitsListAndReplay(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	state, err := js.KeyValue(ctx, events.BucketLTMState)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for i, c := range []*Commit{
		{Tenant: "acme", User: "u1", Session: "s1", Reason: events.CommitReasonSessionEnded, UpTo: 9, Error: "529", Attempts: 5, ParkedAt: now},
		{Tenant: "acme", User: "u2", Session: "s2", Reason: events.CommitReasonCompaction, UpTo: 4, Error: "529", Attempts: 5, ParkedAt: now.Add(-time.Minute)},
	} {
		if err := PutCommit(ctx, state, c); err != nil {
			t.Fatal(i, err)
		}
	}
	if err := PutCommit(ctx, state, &Commit{Tenant: "acme", User: "../u3", Session: "s3"}); err == nil {
		t.Fatal("a commit with an invalid user was parked")
	}
	if _, err := state.Put(ctx, events.CommitKey("acme", "s1"), []byte(`{"last_seq":3}`)); err != nil {
		t.Fatal(err)
	}
	list, err := ListCommits(ctx, js)
	if err != nil || len(list) != 2 || list[0].Session != "s2" || list[1].Key != "parked.acme.s1.9" || list[1].User != "u1" {
		t.Fatalf("parked commits: %+v, %v", list, err)
	}
	if ext, err := List(ctx, js); err != nil || len(ext) != 0 {
		t.Fatalf("parked extractions list commits: %+v, %v", ext, err)
	}
	n, err := ReplayCommits(ctx, js, Filter{Tenant: "acme", Session: "s1"})
	if err != nil || n != 1 {
		t.Fatalf("replayed %d, %v", n, err)
	}
	stream, err := js.Stream(ctx, events.StreamCommits)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(ctx, events.SubjectCommitPartitioned+".*.acme.u1")
	if err != nil {
		t.Fatalf("the replayed request is not queued: %v", err)
	}
	var q events.CommitQueued
	if err := json.Unmarshal(m.Data, &q); err != nil || q != (events.CommitQueued{Session: "s1", Reason: events.CommitReasonReplay, UpTo: 9}) {
		t.Fatalf("replayed request: %s (%v)", m.Data, err)
	}
	if list, _ := ListCommits(ctx, js); len(list) != 1 || list[0].Session != "s2" {
		t.Fatalf("after the replay: %+v", list)
	}
	if _, err := state.Get(ctx, "parked.acme.s1.9"); !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted) {
		t.Fatalf("the replayed commit is still parked: %v", err)
	}
}
