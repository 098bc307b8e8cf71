package gatewaysvc

import (
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// maxRecordBytes is the largest record data capture publishes: below
// pkg/client's event limit, with room for the envelope.
const maxRecordBytes = client.MaxEventBytes - 64<<10

// fitRecord shortens m until its event's data fits limit bytes: the
// longest text (a tool output, usually) is cut in half, with a note of how
// much was cut, until it fits. A record larger than the limit would be
// refused at every request of the session.
func fitRecord(session string, m *events.Message, limit int) (event.Event, error) {
	for range 64 {
		e, err := recordEvent(session, m)
		if err != nil || len(e.Data()) <= limit {
			return e, err
		}
		b := longestText(m.Content)
		if b == nil || len(b.Text) < 1024 {
			break
		}
		cut := len(b.Text) / 2
		b.Text = b.Text[:cut] + fmt.Sprintf("\n[… %d bytes cut by the Recall gateway: the record was over the event limit]", len(b.Text)-cut)
	}
	return event.Event{}, fmt.Errorf("record %s does not fit the event limit (%d bytes)", m.UUID, limit)
}

// longestText is the longest text block of c, nested results included.
func longestText(c events.Content) *events.Block {
	var best *events.Block
	for i := range c {
		b := &c[i]
		if b.Type == events.BlockText && (best == nil || len(b.Text) > len(best.Text)) {
			best = b
		}
		if n := longestText(b.Content); n != nil && (best == nil || len(n.Text) > len(best.Text)) {
			best = n
		}
	}
	return best
}
