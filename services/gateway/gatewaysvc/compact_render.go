package gatewaysvc

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/gateway/wire"
)

// Bounds of the kept window rendered into a compaction block's text.
const (
	renderMaxChars      = 60000
	renderMaxBlockChars = 2000
)

// RecentHeading opens, in a compaction block's text, the messages the
// summary does not cover, rendered as text: a client that drops everything
// before the block (as the APIs allow) still has them.
const RecentHeading = "\n\nThe most recent messages, which the summary above does not cover:\n"

// blockText is what a compaction block (item, client summary) holds: the
// summary, then the kept messages rendered as text. n is the summary's
// length in bytes, so a later request that still sends the kept messages
// uses them verbatim and only the summary from the block.
func blockText(summary string, kept []wire.Msg) (text string, n int) {
	summary = strings.TrimSpace(summary)
	var b strings.Builder
	for i := range kept {
		if kept[i].Role == wire.RoleSystem {
			continue
		}
		renderMsg(&b, &kept[i].Message)
		if b.Len() > renderMaxChars {
			b.WriteString("[… later messages left out]\n")
			break
		}
	}
	if b.Len() == 0 {
		return summary, len(summary)
	}
	return summary + RecentHeading + b.String(), len(summary)
}

func renderMsg(b *strings.Builder, m *events.Message) {
	for _, c := range m.Content {
		switch c.Type {
		case events.BlockText:
			fmt.Fprintf(b, "[%s] %s\n", m.Role, clip(c.Text))
		case events.BlockToolUse:
			fmt.Fprintf(b, "[%s called %s] %s\n", m.Role, c.Name, clip(string(c.Input)))
		case events.BlockToolResult:
			fmt.Fprintf(b, "[tool result] %s\n", clip(wire.Text(c.Content)))
		}
	}
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= renderMaxBlockChars {
		return s
	}
	k := renderMaxBlockChars
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	return s[:k] + " […]"
}
