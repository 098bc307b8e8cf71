// Package testpoll is the one polling helper of Recall's tests: wait for a
// condition with a deadline instead of sleeping a guessed duration.
package testpoll

import (
	"testing"
	"time"
)

// Interval is how often Until evaluates its condition.
const Interval = 10 * time.Millisecond

// Until calls cond every Interval until it returns true, and fails the test
// with "timed out after d waiting for what" once d has passed. It must be
// called from the test's goroutine (it calls t.Fatalf).
func Until(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	UntilEvery(t, d, Interval, what, cond)
}

// UntilEvery is Until for a condition too costly to evaluate every
// Interval (a scan of many keys, a script in a browser): it is evaluated
// every interval.
func UntilEvery(t testing.TB, d, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(interval)
	}
}
