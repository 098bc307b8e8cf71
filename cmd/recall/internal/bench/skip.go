package bench

import "errors"

// errSkip marks a scenario that could not measure anything because the
// component it measures is not available; the message is the reason.
type errSkip struct{ reason string }

func (e errSkip) Error() string { return e.reason }

func skipped(reason string) error { return errSkip{reason} }

func isSkip(err error) (string, bool) {
	var s errSkip
	if errors.As(err, &s) {
		return s.reason, true
	}
	return "", false
}
