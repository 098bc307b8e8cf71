// Package hygiene checks rules of the code's shape that review asked for.
package hygiene

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxServiceFuncLines bounds a function in services/: a service reads as
// named steps (issue 15).
const maxServiceFuncLines = 80

func TestNoLongFunctionsInServices(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir("../../services", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			checked++
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxServiceFuncLines {
				t.Errorf("%s: %s is %d lines (at most %d)", p, fd.Name.Name, n, maxServiceFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d functions found under services/: the walk is broken", checked)
	}
}
