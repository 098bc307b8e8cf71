// Command longterm runs Recall's long-term memory service on its own, configured from RECALL_*
// environment variables (see `recall config`).
package main

import (
	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/services/longterm/longtermsvc"
)

func main() { svcmain.Main("longterm", longtermsvc.Run) }
