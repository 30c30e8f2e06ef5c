package srcsize

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ucxnetEngineFile is the one non-test file of package ucxnet that
// imports the progress engine: the rest of ucxnet sees engines through
// internal/engine.
const ucxnetEngineFile = "engine_ucx.go"

// Package ucxnet reaches internal/progress through one file only.
func TestUCXNetImportsProgressOnce(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "ucxnet")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	var importers []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/ucxnet/ucxnet/internal/progress" {
				importers = append(importers, filepath.Base(path))
			}
		}
	}
	if len(importers) != 1 || importers[0] != ucxnetEngineFile {
		t.Errorf("ucxnet files importing internal/progress: %v; only %s may (it adapts the engine for the rest)", importers, ucxnetEngineFile)
	}
}
