package keylock

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestIsConflict: a lost compare-and-set is a conflict (to retry) on a
// single server and on a replicated bucket, whose code differs.
func TestIsConflict(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"create on an existing key", jetstream.ErrKeyExists, true},
		{"update at a stale revision", fmt.Errorf("updating: %w", jetstream.ErrKeyRevisionMismatch), true},
		{"single-server wrong last sequence", &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence, Code: 400}, true},
		{"replicated wrong last sequence (10164)", &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant, Code: 400}, true},
		{"another API error", &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamNotFound, Code: 404}, false},
		{"no error", nil, false},
		{"a plain error", errors.New("timeout"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsConflict(tc.err); got != tc.want {
				t.Fatalf("IsConflict(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
