package events

import "strconv"

// Parked long-term memory commits: a queued commit that kept failing is
// kept in BucketLTMState under ParkedCommitKey until it is replayed
// (internal/parked lists and replays them; docs/long-term-memory.md).

// ParkedCommitPrefix is the first token of every parked commit's key in
// BucketLTMState.
const ParkedCommitPrefix = "parked"

// CommitReasonReplay is the reason of a commit request re-queued from a
// parked commit.
const CommitReasonReplay = "replay"

// ParkedCommitKey is the BucketLTMState key of a parked commit:
// parked.<tenant>.<session>.<up_to>.
func ParkedCommitKey(tenant, session string, upTo uint64) string {
	return ParkedCommitPrefix + "." + tenant + "." + session + "." + strconv.FormatUint(upTo, 10)
}
