// Command compactor runs Recall's compactor service on its own, configured from RECALL_*
// environment variables (see `recall config`).
package main

import (
	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/services/compactor/compactorsvc"
)

func main() { svcmain.Main("compactor", compactorsvc.Run) }
