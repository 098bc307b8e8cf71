// Command trigger runs Recall's trigger service on its own, configured from RECALL_*
// environment variables (see `recall config`).
package main

import (
	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

func main() { svcmain.Main("trigger", triggersvc.Run) }
