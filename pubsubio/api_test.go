package pubsubio_test

import (
	"flag"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/gosource"
)

// The exported API of every public package, one name per line, is kept in
// testdata/api.txt: a change to it shows in review, and an unintended
// addition fails here. Run with -update_api to rewrite the file after an
// intended change. The drop-in (io/pubsubio) has its own test against
// Beam's API.

var updateAPI = flag.Bool("update_api", false, "rewrite testdata/api.txt from the exported names of the public packages")

// publicPackages are the directories, relative to this one, whose exported
// names are the API.
var publicPackages = []string{".", "connection", "dedup", "dlq", "model", "record", "sink", "source", "typed"}

const apiFile = "testdata/api.txt"

func TestExportedAPI(t *testing.T) {
	var got []string
	for _, dir := range publicPackages {
		got = append(got, exportedNames(t, dir)...)
	}
	if *updateAPI {
		if err := os.WriteFile(apiFile, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d exported names to %s", len(got), apiFile)
		return
	}
	data, err := os.ReadFile(apiFile)
	if err != nil {
		t.Fatalf("%v (go test ./pubsubio/ -run TestExportedAPI -args -update_api writes it)", err)
	}
	want := strings.Split(strings.TrimSpace(string(data)), "\n")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the exported API changed (-%s +now); if intended, rerun with -args -update_api:\n%s", apiFile, diff)
	}
	t.Logf("%d exported names in %d packages", len(got), len(publicPackages))
}

// exportedNames returns the exported names the package in dir declares,
// qualified by its import path below pubsubio/: constants, variables,
// functions, types, their methods and their exported struct fields.
func exportedNames(t *testing.T, dir string) []string {
	t.Helper()
	fset, files := parseLibrary(t, dir)
	pkg, err := doc.NewFromFiles(fset, files, modulePrefix+dir)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "pubsubio"
	if dir != "." {
		prefix += "/" + dir
	}
	var names []string
	add := func(kind, name string) { names = append(names, prefix+" "+kind+" "+name) }
	members := func(typ *doc.Type, name string) {
		for _, m := range typ.Methods {
			add("method", name+"."+m.Name)
		}
		spec := typ.Decl.Specs[0].(*ast.TypeSpec)
		if st, ok := spec.Type.(*ast.StructType); ok && spec.Assign == 0 {
			for _, field := range st.Fields.List {
				for _, n := range field.Names {
					if n.IsExported() {
						add("field", name+"."+n.Name)
					}
				}
			}
		}
	}
	values := func(vs []*doc.Value, kind string) {
		for _, v := range vs {
			for _, n := range v.Names {
				if ast.IsExported(n) {
					add(kind, n)
				}
			}
		}
	}
	values(pkg.Consts, "const")
	values(pkg.Vars, "var")
	for _, f := range pkg.Funcs {
		add("func", f.Name)
	}
	for _, typ := range pkg.Types {
		add("type", typ.Name)
		values(typ.Consts, "const")
		values(typ.Vars, "var")
		for _, f := range typ.Funcs {
			add("func", f.Name)
		}
		members(typ, typ.Name)
		if target := internalTarget(t, typ, files); target != nil {
			members(target, typ.Name)
		}
	}
	slices.Sort(names)
	return names
}

// modulePrefix is the import path of this directory.
const modulePrefix = "github.com/pubsubio/beam-pubsubio/pubsubio/"

// internalTarget returns the type that typ, an alias, stands for when it is
// declared in an internal package of pubsubio, whose methods and fields
// are then the alias's API; nil otherwise.
func internalTarget(t *testing.T, typ *doc.Type, files []*ast.File) *doc.Type {
	t.Helper()
	spec := typ.Decl.Specs[0].(*ast.TypeSpec)
	if spec.Assign == 0 {
		return nil
	}
	sel, _ := spec.Type.(*ast.SelectorExpr)
	var pkg *ast.Ident
	if sel != nil {
		pkg, _ = sel.X.(*ast.Ident)
	}
	if pkg == nil {
		ast.Inspect(spec.Type, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && strings.Contains(importPath(files, id.Name), "/internal/") {
				t.Fatalf("alias %s stands for an internal type in a form this test cannot follow; alias the named type itself", typ.Name)
			}
			return true
		})
		return nil
	}
	path := importPath(files, pkg.Name)
	dir, ok := strings.CutPrefix(path, modulePrefix)
	if !ok || !strings.Contains("/"+dir+"/", "/internal/") {
		return nil
	}
	fset, pkgFiles := parseLibrary(t, dir)
	target, err := doc.NewFromFiles(fset, pkgFiles, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range target.Types {
		if tt.Name == sel.Sel.Name {
			if next := internalTarget(t, tt, pkgFiles); next != nil {
				return next // an alias of an alias
			}
			return tt
		}
	}
	t.Fatalf("%s: alias %s stands for %s.%s, which %s does not declare", dir, typ.Name, pkg.Name, sel.Sel.Name, path)
	return nil
}

// importPath returns the path that name is imported as in files, or "".
func importPath(files []*ast.File, name string) string {
	for _, f := range files {
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			local := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
			if local == name {
				return path
			}
		}
	}
	return ""
}

// parseLibrary parses the non-test Go files in dir, with their comments.
func parseLibrary(t *testing.T, dir string) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset, files, err := gosource.ParseDir(dir, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	return fset, files
}

// qualifiers are the words the facade may add, before or after, to the
// name of a leaf package's identifier where that name alone would be
// ambiguous in the facade's one namespace: source.Config is ReadConfig
// beside sink.Config, WriteConfig.
var qualifiers = map[string][]string{
	"source": {"Read"},
	"sink":   {"Write"},
	"dlq":    {"DeadLetter", "DeadLetters"},
	"dedup":  {"Dedup"},
	"record": {"Record"},
}

// namedForPackage are facade names that are their leaf package's name:
// connection.Settings is the package's one concept, and ReadConfig's and
// WriteConfig's field that holds it reads best as Connection.
var namedForPackage = map[string]string{"Connection": "connection.Settings"}

// TestFacadeSpellsItsLeaves: every facade name that stands for one name of
// a public leaf package (an alias, a constant, a wrapper whose body is one
// call) is spelled as the leaf spells it, or with the leaf's qualifier
// added: one concept, one name.
func TestFacadeSpellsItsLeaves(t *testing.T) {
	fset, files := parseLibrary(t, ".")
	checked := 0
	check := func(pos token.Pos, name string, target ast.Expr) {
		sel, ok := target.(*ast.SelectorExpr)
		if !ok {
			return
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok || !slices.Contains(publicPackages, pkg.Name) {
			return
		}
		checked++
		leaf := sel.Sel.Name
		if name == leaf || namedForPackage[name] == pkg.Name+"."+leaf {
			return
		}
		for _, q := range qualifiers[pkg.Name] {
			if name == q+leaf || name == leaf+q {
				return
			}
		}
		t.Errorf("%s: pubsubio.%s stands for %s.%s: spell it %s, or %s with a qualifier of %s (%v)",
			fset.Position(pos), name, pkg.Name, leaf, leaf, leaf, pkg.Name, qualifiers[pkg.Name])
	}
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch sp := spec.(type) {
					case *ast.TypeSpec:
						check(sp.Pos(), sp.Name.Name, sp.Type)
					case *ast.ValueSpec:
						if len(sp.Names) == 1 && len(sp.Values) == 1 {
							check(sp.Pos(), sp.Names[0].Name, sp.Values[0])
						}
					}
				}
			case *ast.FuncDecl:
				if call := oneCall(d); call != nil && d.Recv == nil {
					check(d.Pos(), d.Name.Name, call.Fun)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d facade names; the facade has more: is the parse right?", checked)
	}
	t.Logf("checked %d facade names against the leaves they stand for", checked)
}

// oneCall returns the call that is the whole body of fn (a statement or a
// return), or nil.
func oneCall(fn *ast.FuncDecl) *ast.CallExpr {
	if fn.Body == nil || len(fn.Body.List) != 1 {
		return nil
	}
	var expr ast.Expr
	switch st := fn.Body.List[0].(type) {
	case *ast.ExprStmt:
		expr = st.X
	case *ast.ReturnStmt:
		if len(st.Results) == 1 {
			expr = st.Results[0]
		}
	}
	call, _ := expr.(*ast.CallExpr)
	return call
}
