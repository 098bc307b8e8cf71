// Command extractor runs Recall's extractor service on its own, configured from RECALL_*
// environment variables (see `recall config`).
package main

import (
	"github.com/recallhq/recall/internal/svcmain"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
)

func main() { svcmain.Main("extractor", extractorsvc.Run) }
