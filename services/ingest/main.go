// Command ingest runs Recall's ingest service on its own, configured from RECALL_*
// environment variables (see `recall config`).
package main

import (
	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

func main() { svcmain.Main("ingest", ingestsvc.Run) }
