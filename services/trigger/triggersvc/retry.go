package triggersvc

import (
	"time"

	"github.com/recallhq/recall/pkg/retry"
)

// attemptTimeout bounds one network call inside a retry loop.
const attemptTimeout = 5 * time.Second

// effects is the trigger's retry policy (pkg/retry) for the calls its
// lanes cannot do without — publications, rebuilds, reads: it calls until
// the call succeeds or the lane's context is done, waiting 100 ms, 200 ms,
// … up to 2 s between attempts, logging every tenth failure, each call
// bounded by attemptTimeout. It never gives up while the context lives: the
// trigger stops taking work rather than skip an effect. Do returns nil on
// success and ctx.Err() when ctx ended first.
var effects = retry.Policy{First: 100 * time.Millisecond, Max: 2 * time.Second, Attempt: attemptTimeout, LogEvery: 10}
