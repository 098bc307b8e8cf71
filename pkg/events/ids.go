package events

import (
	"errors"
	"fmt"
)

// MaxIDLength bounds tenant and session ids so subjects and KV keys stay short.
const MaxIDLength = 128

// ErrInvalidID is returned (wrapped) by ValidateID.
var ErrInvalidID = errors.New("invalid id")

// ValidateID reports whether id may be used as a tenant or session id.
//
// Ids become NATS subject tokens and KV key parts, so Recall rejects rather
// than encodes anything outside a safe set: 1 to MaxIDLength characters from
// A-Z, a-z, 0-9, '-' and '_'. UUIDs, ULIDs and most slugs pass unchanged; an id
// that cannot inject '.', '*', '>', whitespace or control characters into a
// subject needs no escaping anywhere, and a rejected id gets an error naming
// the offending character and its position.
func ValidateID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty", ErrInvalidID)
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("%w: %d bytes, at most %d allowed", ErrInvalidID, len(id), MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		case c >= 0x80:
			return fmt.Errorf("%w: non-ASCII byte 0x%02x at byte %d is not allowed (use A-Z a-z 0-9 - _)", ErrInvalidID, c, i)
		default:
			return fmt.Errorf("%w: character %q at byte %d is not allowed (use A-Z a-z 0-9 - _)", ErrInvalidID, rune(c), i)
		}
	}
	return nil
}
