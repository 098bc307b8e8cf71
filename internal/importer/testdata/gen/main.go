// Command gen writes the Claude Code transcript fixtures of the importer
// tests. The conversations are written by hand in coding.go and
// refactor.go; gen only frames them as Claude Code 2.0 JSONL records
// (field names, record kinds and streaming as Claude Code writes them).
//
//	go run ./internal/importer/testdata/gen
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	dir := filepath.Join("internal", "importer", "testdata")
	for name, g := range map[string]*gen{
		"coding-session.jsonl":   codingSession(),
		"refactor-session.jsonl": refactorSession(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), g.buf.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("%s: %d records\n", name, g.records)
	}
}
