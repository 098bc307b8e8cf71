package memory

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// triggerStateVersion is the first byte of an encoded TriggerState; a
// snapshot of another version is refused (the state is then rebuilt from
// the transcript).
const triggerStateVersion = 1

// ErrTriggerState marks bytes that are not an encoded TriggerState of this
// version.
var ErrTriggerState = errors.New("not a trigger state snapshot")

// MarshalBinary encodes the state, so that a long session's state can be
// stored and later restored instead of replaying every record before it
// (UnmarshalBinary, then Observe the records after LastSeq).
func (s *TriggerState) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 96+len(s.respUUID))
	b = append(b, triggerStateVersion)
	for _, u := range []uint64{s.lastSeq, s.runID, s.respID, s.respSeq, s.lastExtractSeq} {
		b = binary.AppendUvarint(b, u)
	}
	for _, v := range []int64{s.est, s.anchorTokens, s.anchorEst, s.runStartEst, s.baseline, int64(s.toolCalls), s.respTime, int64(s.extractions)} {
		b = binary.AppendVarint(b, v)
	}
	var flags uint64
	for i, f := range []bool{s.hasAnchor, s.initialized, s.compacting, s.ended, s.pending, s.respTools, s.respLastTU, s.speaksStop} {
		if f {
			flags |= 1 << i
		}
	}
	b = binary.AppendUvarint(b, flags)
	b = binary.AppendUvarint(b, uint64(len(s.respUUID)))
	return append(b, s.respUUID...), nil
}

// UnmarshalBinary restores a state MarshalBinary encoded; on error s is
// left unchanged and the error wraps ErrTriggerState.
func (s *TriggerState) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] != triggerStateVersion {
		return fmt.Errorf("%w: version %v", ErrTriggerState, b[:min(len(b), 1)])
	}
	r := snapReader{b: b[1:]}
	var t TriggerState
	for _, u := range []*uint64{&t.lastSeq, &t.runID, &t.respID, &t.respSeq, &t.lastExtractSeq} {
		*u = r.uvarint()
	}
	var toolCalls, extractions int64
	for _, v := range []*int64{&t.est, &t.anchorTokens, &t.anchorEst, &t.runStartEst, &t.baseline, &toolCalls, &t.respTime, &extractions} {
		*v = r.varint()
	}
	t.toolCalls, t.extractions = int32(toolCalls), int32(extractions)
	flags := r.uvarint()
	for i, f := range []*bool{&t.hasAnchor, &t.initialized, &t.compacting, &t.ended, &t.pending, &t.respTools, &t.respLastTU, &t.speaksStop} {
		*f = flags&(1<<i) != 0
	}
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) || n != uint64(len(r.b)) {
		return fmt.Errorf("%w: truncated or trailing bytes", ErrTriggerState)
	}
	t.respUUID = string(r.b)
	*s = t
	return nil
}

// snapReader reads varints, remembering the first failure.
type snapReader struct {
	b   []byte
	err error
}

func (r *snapReader) uvarint() uint64 { return readVarint(r, binary.Uvarint) }

func (r *snapReader) varint() int64 { return readVarint(r, binary.Varint) }

// readVarint decodes one varint with dec (binary.Uvarint or Varint).
func readVarint[T uint64 | int64](r *snapReader, dec func([]byte) (T, int)) T {
	v, n := dec(r.b)
	if n <= 0 {
		r.err = ErrTriggerState
		return 0
	}
	r.b = r.b[n:]
	return v
}
