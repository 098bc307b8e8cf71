// Package jsonbench measures the JSON libraries Recall could use on its hot
// paths, on the transcript records the benchmark generates: decoding a
// message, reducing it for the trigger, encoding a batch of messages. It is
// its own module so the candidates never enter Recall's dependency graph;
// docs/benchmarks.md ("Choosing the JSON library") has the numbers and the
// choice.
//
//	cd tools/jsonbench && go test -run '^$' -bench . -benchmem
package jsonbench
