// Command gateway runs Recall's model gateway on its own, configured from
// RECALL_* environment variables (see `recall config`).
package main

import (
	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/services/gateway/gatewaysvc"
)

func main() { svcmain.Main("gateway", gatewaysvc.Run) }
