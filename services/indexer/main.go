// Command indexer runs Recall's session index service on its own, configured from RECALL_*
// environment variables (see `recall config`).
package main

import (
	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/services/indexer/indexersvc"
)

func main() { svcmain.Main("indexer", indexersvc.Run) }
