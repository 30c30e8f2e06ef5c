package ucxnet

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ucxnet's code (its tests aside) keeps to the project's size bounds: no
// function over 80 lines, no file over 600, so that each function reads as
// one step and each file has one job.
func TestSourceSizes(t *testing.T) {
	const maxFunc, maxFile = 80, 600
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("listing the package's files: %v (%d found)", err, len(files))
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(src, []byte("\n")); n > maxFile {
			t.Errorf("%s has %d lines, more than %d: split it by job", name, n, maxFile)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			if n := end.Line - start.Line + 1; n > maxFunc {
				t.Errorf("%s:%d: %s has %d lines, more than %d: split it into named steps", name, start.Line, fd.Name.Name, n, maxFunc)
			}
		}
	}
}
