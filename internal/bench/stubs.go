package bench

import "context"

func runCompaction(ctx context.Context, e *env) error {
	return skipped("the compactor service is not implemented yet")
}

func runExtraction(ctx context.Context, e *env) error {
	return skipped("the extractor service is not implemented yet")
}
