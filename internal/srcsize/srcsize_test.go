package srcsize

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const (
	maxFileLines = 600
	maxFuncLines = 80
)

// cliForbidden are the import paths that no file under cmd/ may import.
var cliForbidden = []string{
	"github.com/ucxnet/ucxnet/internal/cucx",
	"github.com/ucxnet/ucxnet/internal/progress",
}

// Every non-test Go file of every module keeps to 600 lines and every
// function in it to 80, so that each file has one job and each function
// reads as one step; the CLI keeps to the public packages.
func TestSourceShape(t *testing.T) {
	root := repoRoot(t)
	files, modules := goFiles(t, root)
	if len(modules) == 0 || len(files) == 0 {
		t.Fatalf("found %d modules and %d Go files under %s", len(modules), len(files), root)
	}
	t.Logf("%d Go files in %d modules: %s", len(files), len(modules), strings.Join(modules, " "))
	fset := token.NewFileSet()
	for _, rel := range files {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, rel, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(rel, "cmd/") {
			checkCLIImports(t, fset, rel, f)
		}
		if strings.HasSuffix(rel, "_test.go") {
			continue
		}
		for _, p := range sizeProblems(fset, rel, src, f) {
			t.Error(p)
		}
	}
}

// sizeProblems describes each bound that the file breaks, as file:line and
// the size: its length, and that of each function declaration and of each
// function literal in a package-level declaration.
func sizeProblems(fset *token.FileSet, rel string, src []byte, f *ast.File) []string {
	var out []string
	if n := bytes.Count(src, []byte("\n")); n > maxFileLines {
		out = append(out, fmt.Sprintf("%s: %d lines, more than %d: split it by job", rel, n, maxFileLines))
	}
	tooLong := func(what string, n ast.Node) {
		start, end := fset.Position(n.Pos()), fset.Position(n.End())
		if lines := end.Line - start.Line + 1; lines > maxFuncLines {
			out = append(out, fmt.Sprintf("%s:%d: %s has %d lines, more than %d: split it into named steps",
				rel, start.Line, what, lines, maxFuncLines))
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Body != nil {
				tooLong(funcName(d), d)
			}
		case *ast.GenDecl:
			// A function literal in a package-level declaration (a
			// command's Setup, a handler table) is a function too; those
			// inside functions count towards their function.
			ast.Inspect(d, func(n ast.Node) bool {
				if lit, ok := n.(*ast.FuncLit); ok {
					tooLong("a function literal", lit)
					return false
				}
				return true
			})
		}
	}
	return out
}

// funcName is fd's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

func checkCLIImports(t *testing.T, fset *token.FileSet, rel string, f *ast.File) {
	t.Helper()
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			t.Fatalf("%s: import %s: %v", fset.Position(imp.Pos()), imp.Path.Value, err)
		}
		for _, bad := range cliForbidden {
			if path == bad || strings.HasPrefix(path, bad+"/") {
				t.Errorf("%s: imports %s: the CLI uses the public packages only", fset.Position(imp.Pos()), path)
			}
		}
	}
}

// repoRoot is the nearest folder above the working directory (the
// package's own) that holds a go.mod: the core module's root.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's working directory")
		}
		dir = parent
	}
}

// goFiles lists the Go files under root as slash paths relative to it, and
// the folders that hold a go.mod (the modules). It skips what the go
// command skips: testdata, vendor and names starting with "." or "_".
func goFiles(t *testing.T, root string) (files, modules []string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case name == "go.mod":
			modules = append(modules, filepath.Dir(rel))
		case strings.HasSuffix(name, ".go") && !strings.HasPrefix(name, ".") && !strings.HasPrefix(name, "_"):
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files, modules
}
