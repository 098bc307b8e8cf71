package triggersvc

import (
	"github.com/nats-io/nats.go/jetstream"
)

// hold keeps the consumer's ack floor below the last record of a pending
// response until the response is complete, so a restart redelivers it and
// the quiet-period decision cannot be lost. Holds are appended in sequence
// order; one whose session moved on is dead and skipped.
type hold struct {
	s        *session
	seq      uint64
	deadline int64 // stream time of the record + quiet period
}

func (h *hold) live() bool {
	seq, _, ok := h.s.st.Pending()
	return ok && seq == h.seq && !h.s.dropped
}

// delivery is a delivered message not acknowledged yet.
type delivery struct {
	m   jetstream.Msg
	seq uint64
}

// ledger is a lane's delivery ledger: what was delivered and not
// acknowledged, and the holds that keep the ack floor down. The consumer
// acknowledges with AckAll, so one ack on the newest acknowledgeable
// delivery covers every record below it. It is owned by one lane goroutine.
type ledger struct {
	holds     []hold     // FIFO by sequence
	unacked   []delivery // delivered, not acknowledged, in delivery order
	ackedSeq  uint64
	unflushed int // records processed since the last ack
}

// delivered records a delivery to acknowledge once it is below the limit.
func (l *ledger) delivered(m jetstream.Msg, seq uint64) {
	l.unacked = append(l.unacked, delivery{m, seq})
}

// hold adds a hold (h.seq must not be below an earlier hold's).
func (l *ledger) hold(h hold) { l.holds = append(l.holds, h) }

// dropHolds forgets every hold (after the sessions were dropped).
func (l *ledger) dropHolds() {
	clear(l.holds)
	l.holds = l.holds[:0]
}

// ack acknowledges the newest delivery below both next (the first record
// not processed) and the oldest live hold. The caller must have made sure
// every effect of the records below next is stored.
func (l *ledger) ack(next uint64) {
	l.unflushed = 0
	i := 0
	for i < len(l.holds) && !l.holds[i].live() {
		i++
	}
	if i > 0 {
		n := copy(l.holds, l.holds[i:])
		clear(l.holds[n:])
		l.holds = l.holds[:n]
	}
	limit := next
	if len(l.holds) > 0 {
		limit = min(limit, l.holds[0].seq)
	}
	best := -1
	for i, d := range l.unacked {
		if d.seq < limit && (best < 0 || d.seq > l.unacked[best].seq) {
			best = i
		}
	}
	if best < 0 {
		return
	}
	bseq := l.unacked[best].seq
	if bseq > l.ackedSeq {
		if err := l.unacked[best].m.Ack(); err != nil {
			return
		}
		l.ackedSeq = bseq
	}
	keep := l.unacked[:0]
	for _, d := range l.unacked {
		if d.seq > bseq {
			keep = append(keep, d)
		}
	}
	clear(l.unacked[len(keep):])
	l.unacked = keep
}
