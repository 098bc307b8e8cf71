package memory

import "fmt"

// NotesPath is the path the fork's Edit tool must name for a session's memory
// document.
func NotesPath(tenant, session string) string {
	return fmt.Sprintf("recall://%s/%s/memory.md", tenant, session)
}
