package provision

import (
	"time"

	"github.com/recallhq/recall/pkg/retry"
)

// AttemptTimeout bounds one attempt of a start-up call (one stream or bucket
// created, one bucket opened, one watch started). A call that hangs — its
// request went to a node that is going away, or to one that just returned
// and is still catching up — is abandoned after this long and tried again,
// so a degraded cluster costs a service seconds at start, not a minute.
const AttemptTimeout = 5 * time.Second

// Startup is the retry policy of start-up reads, watches and provisioning
// (Startup.Do): each attempt bounded to AttemptTimeout, 250 ms after the
// first failure, then twice as long each time, at most 5 s, until the
// attempt succeeds, returns a retry.Permanent error or ctx ends. For
// attempts that legitimately take longer (a batch of publishes awaiting
// their acknowledgements, several calls each bounded by AttemptTimeout),
// copy it and set Attempt.
var Startup = retry.Policy{First: 250 * time.Millisecond, Max: 5 * time.Second, Attempt: AttemptTimeout}
