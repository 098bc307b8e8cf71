// Package retry re-exports pkg/retry, Recall's one retry policy, under the
// import path the services have always used; it adds nothing. See
// pkg/retry for the contract.
package retry

import (
	"time"

	"github.com/recallhq/recall/pkg/retry"
)

// Policy is retry.Policy.
type Policy = retry.Policy

// Backoff is retry.Backoff.
type Backoff = retry.Backoff

// Permanent marks err as one Policy.Do must not retry (retry.Permanent).
func Permanent(err error) error { return retry.Permanent(err) }

// Pause waits d, or less when stop is closed first (retry.Pause).
func Pause(stop <-chan struct{}, d time.Duration) bool { return retry.Pause(stop, d) }
