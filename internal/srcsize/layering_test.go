package srcsize

import (
	"bytes"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ucxnetEngineFile is the one non-test file of package ucxnet that
// imports the progress engine: the rest of ucxnet sees engines through
// internal/engine.
const ucxnetEngineFile = "engine_ucx.go"

// Package ucxnet reaches internal/progress through one file only, and
// the UCX binding (internal/cucx) never: progress wraps what it needs.
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
			switch p, _ := strconv.Unquote(imp.Path.Value); p {
			case "github.com/ucxnet/ucxnet/internal/progress":
				importers = append(importers, filepath.Base(path))
			case "github.com/ucxnet/ucxnet/internal/cucx":
				t.Errorf("%s imports internal/cucx; ucxnet reaches UCX through internal/progress", filepath.Base(path))
			}
		}
	}
	if len(importers) != 1 || importers[0] != ucxnetEngineFile {
		t.Errorf("ucxnet files importing internal/progress: %v; only %s may (it adapts the engine for the rest)", importers, ucxnetEngineFile)
	}
}

// ucxnetMaxLines bounds package ucxnet's non-test files together: it is
// the face over the session (blocking, deadlines, *net.OpError, the
// wiring), not a second conn core.
const ucxnetMaxLines = 1500

// Package ucxnet's non-test files total at most ucxnetMaxLines lines.
func TestUCXNetSize(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "ucxnet")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	total := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		total += bytes.Count(b, []byte("\n"))
	}
	if total > ucxnetMaxLines {
		t.Errorf("package ucxnet's non-test files have %d lines, over %d: the conn core belongs in internal/session", total, ucxnetMaxLines)
	}
}

// The packages the session (internal/session) never imports: the cgo
// ones (the UCX binding and the progress engine, which package ucxnet
// hands in) and the face above it.
var sessionForbids = []string{
	"github.com/ucxnet/ucxnet/internal/cucx",
	"github.com/ucxnet/ucxnet/internal/progress",
	"github.com/ucxnet/ucxnet/ucxnet",
}

// Package session is pure Go: no non-test file imports cucx, progress or
// ucxnet; its tests import ucxnet never, and progress only in files built
// with cgo alone (they hand the progress engine in, as ucxnet does).
func TestSessionImportsNoCgo(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "internal", "session")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		test := strings.HasSuffix(path, "_test.go")
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !slices.Contains(sessionForbids, p) {
				continue
			}
			if test && p == "github.com/ucxnet/ucxnet/internal/cucx" {
				continue // its stub builds without cgo
			}
			if test && p == "github.com/ucxnet/ucxnet/internal/progress" && cgoOnly(f) {
				continue
			}
			t.Errorf("%s: imports %s: package session imports no cgo package and not ucxnet", fset.Position(imp.Pos()), p)
		}
	}
}

// cgoOnly reports whether f's build constraint leaves it out of every
// build without cgo.
func cgoOnly(f *ast.File) bool {
	for _, g := range f.Comments {
		if g.Pos() > f.Package {
			break
		}
		for _, c := range g.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			expr, err := constraint.Parse(c.Text)
			return err == nil && !expr.Eval(func(tag string) bool { return tag != "cgo" })
		}
	}
	return false
}
