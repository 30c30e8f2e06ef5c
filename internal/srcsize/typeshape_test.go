package srcsize

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const (
	maxMethods     = 40
	maxMethodFiles = 8
)

// noInitDirs are the packages that may have no init function: the face
// and the conn core take what they need as arguments, not from hooks a
// package installs when it is initialised.
var noInitDirs = []string{"ucxnet", "internal/session"}

// Every type outside the UCX binding (internal/cucx, which mirrors UCP's
// API) keeps to 40 methods declared in at most 8 files, so that a type
// has one job and a reader finds it in a few files; and the face and the
// conn core have no init function.
func TestTypeShape(t *testing.T) {
	root := repoRoot(t)
	files, _ := goFiles(t, root)
	type typeKey struct{ dir, name string }
	methods := map[typeKey]int{}
	where := map[typeKey]map[string]bool{}
	fset := token.NewFileSet()
	for _, rel := range files {
		if strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(rel, "internal/cucx/") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		dir := path.Dir(rel)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fd.Recv == nil {
				if fd.Name.Name == "init" && contains(noInitDirs, dir) {
					t.Errorf("%s: func init in %s: hand what it sets up in as an argument", rel, dir)
				}
				continue
			}
			name, _, ok := strings.Cut(funcName(fd), ".")
			if !ok {
				continue
			}
			k := typeKey{dir, name}
			methods[k]++
			if where[k] == nil {
				where[k] = map[string]bool{}
			}
			where[k][path.Base(rel)] = true
		}
	}
	if len(methods) == 0 {
		t.Fatal("found no methods")
	}
	var problems []string
	for k, n := range methods {
		if n > maxMethods || len(where[k]) > maxMethodFiles {
			var fs []string
			for f := range where[k] {
				fs = append(fs, f)
			}
			sort.Strings(fs)
			problems = append(problems, fmt.Sprintf("%s.%s: %d methods in %d files (%s), more than %d or %d: split it by job",
				k.dir, k.name, n, len(fs), strings.Join(fs, " "), maxMethods, maxMethodFiles))
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
