// Command layering counts, for each library package, its files, its lines
// and the references between its files that run back up: files are laid
// out top to bottom so that as many references as possible point down
// (from a file to a file it uses below it), and a reference that must
// point up anyway is one a reader meets before its target's own
// dependencies. A package whose files form no cycle has none.
//
//	go run ./scripts/layering ./pubsubio/...
//	go run ./scripts/layering -v ./pubsubio/source
//
// A reference is a file using a name another file of the package declares
// (a type, function, method, field, variable or constant); test files are
// left out. The layout is the greedy one of Eades, Lin and Smyth (1993);
// -v lists the references that run back up and the names behind them.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

var verbose = flag.Bool("v", false, "list the references that run back up, with the names behind them")

// listed is what go list says of a package.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	Standard   bool
	DepOnly    bool
	Module     struct{ Path string }
}

func main() {
	flag.Parse()
	patterns := flag.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	pkgs, exports, err := list(patterns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "layering:", err)
		os.Exit(1)
	}
	fmt.Printf("%-40s %5s %6s %6s %8s\n", "package", "files", "lines", "arrows", "back up")
	for _, p := range pkgs {
		g, err := load(p, exports)
		if err != nil {
			fmt.Fprintf(os.Stderr, "layering: %s: %v\n", p.ImportPath, err)
			os.Exit(1)
		}
		back := g.backUp()
		fmt.Printf("%-40s %5d %6d %6d %8d\n", strings.TrimPrefix(p.ImportPath, p.Module.Path+"/"), len(g.files), g.lines, g.arrows(), len(back))
		if *verbose {
			for _, a := range back {
				fmt.Printf("    %s -> %s: %s\n", a.from, a.to, strings.Join(a.names, ", "))
			}
		}
	}
}

// list returns the packages patterns match, without test files, and the
// export data of every package they import.
func list(patterns []string) ([]listed, map[string]string, error) {
	cmd := exec.Command("go", append([]string{"list", "-export", "-deps", "-json"}, patterns...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("go list %v: %w\n%s", patterns, err, stderr.String())
	}
	var pkgs []listed
	exports := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, nil, err
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly && !p.Standard && len(p.GoFiles) > 0 {
			pkgs = append(pkgs, p)
		}
	}
	return pkgs, exports, nil
}

// graph is one package's files and the references between them.
type graph struct {
	files []string
	lines int
	refs  map[[2]string]map[string]bool // from, to -> names
}

// load type-checks p's files and records which file uses which other
// file's names.
func load(p listed, exports map[string]string) (*graph, error) {
	fset := token.NewFileSet()
	g := &graph{refs: map[[2]string]map[string]bool{}}
	var files []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		g.files = append(g.files, name)
		g.lines += fset.File(f.Pos()).LineCount()
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	pkg, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, info)
	if err != nil {
		return nil, err
	}
	fileOf := func(pos token.Pos) string { return filepath.Base(fset.Position(pos).Filename) }
	use := func(at token.Pos, obj types.Object) {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			return
		}
		if v, ok := obj.(*types.Var); ok && !v.IsField() && obj.Parent() != pkg.Scope() {
			return // a local variable or parameter
		}
		if _, ok := obj.(*types.Label); ok {
			return
		}
		if obj.Parent() != nil && obj.Parent() != pkg.Scope() && obj.Parent() != types.Universe {
			return // declared inside a function
		}
		from, to := fileOf(at), fileOf(obj.Pos())
		if from == to {
			return
		}
		key := [2]string{from, to}
		if g.refs[key] == nil {
			g.refs[key] = map[string]bool{}
		}
		g.refs[key][obj.Name()] = true
	}
	for id, obj := range info.Uses {
		use(id.Pos(), obj)
	}
	for sel, s := range info.Selections {
		use(sel.Sel.Pos(), s.Obj())
	}
	return g, nil
}

func (g *graph) arrows() int { return len(g.refs) }

// arrow is a reference from one file to another, and the names it uses.
type arrow struct {
	from, to string
	names    []string
}

// backUp lays the files out and returns the arrows that run back up,
// sorted.
func (g *graph) backUp() []arrow {
	out := map[string][]string{}
	for k := range g.refs {
		out[k[0]] = append(out[k[0]], k[1])
	}
	rank := map[string]int{}
	for i, f := range layout(g.files, out) {
		rank[f] = i
	}
	var back []arrow
	for k, names := range g.refs {
		if rank[k[0]] > rank[k[1]] {
			a := arrow{from: k[0], to: k[1]}
			for n := range names {
				a.names = append(a.names, n)
			}
			slices.Sort(a.names)
			back = append(back, a)
		}
	}
	slices.SortFunc(back, func(a, b arrow) int { return strings.Compare(a.from+" "+a.to, b.from+" "+b.to) })
	return back
}

// layout orders files top to bottom, users above what they use: the
// greedy heuristic of Eades, Lin and Smyth. Files that use nothing left go
// to the bottom, files nothing left uses to the top, and otherwise the
// file with the most uses out over uses in goes up next. Ties go by name,
// so the layout is the same on every run.
func layout(files []string, out map[string][]string) []string {
	left := map[string]bool{}
	for _, f := range files {
		left[f] = true
	}
	in := map[string][]string{}
	for f, tos := range out {
		for _, to := range tos {
			in[to] = append(in[to], f)
		}
	}
	degree := func(f string, edges map[string][]string) int {
		n := 0
		for _, o := range edges[f] {
			if left[o] {
				n++
			}
		}
		return n
	}
	sorted := slices.Clone(files)
	slices.Sort(sorted)
	var top, bottom []string
	for len(top)+len(bottom) < len(files) {
		moved := false
		for _, f := range sorted {
			if left[f] && degree(f, out) == 0 {
				bottom, left[f], moved = append([]string{f}, bottom...), false, true
			}
		}
		for _, f := range sorted {
			if left[f] && degree(f, in) == 0 {
				top, left[f], moved = append(top, f), false, true
			}
		}
		if moved {
			continue
		}
		best, bestDelta := "", 0
		for _, f := range sorted {
			if d := degree(f, out) - degree(f, in); left[f] && (best == "" || d > bestDelta) {
				best, bestDelta = f, d
			}
		}
		top, left[best] = append(top, best), false
	}
	return append(top, bottom...)
}
