package pubsubio_test

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners" // the --runner flag
	"github.com/google/go-cmp/cmp"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/gosource"
	"github.com/pubsubio/beam-pubsubio/pubsubio/io/pubsubio"
)

// exportedAPI lists the exported declarations of the package in dir: each
// function with its parameter and result types, each type with its
// definition, each constant and variable, as source text (parameter names
// and comments left out).
func exportedAPI(t *testing.T, dir string) []string {
	t.Helper()
	fset, files, err := gosource.ParseDir(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	text := func(n ast.Node) string {
		var b bytes.Buffer
		if err := printer.Fprint(&b, fset, n); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	types := func(fl *ast.FieldList) string {
		if fl == nil {
			return ""
		}
		var ts []string
		for _, f := range fl.List {
			for range max(1, len(f.Names)) {
				ts = append(ts, text(f.Type))
			}
		}
		return strings.Join(ts, ", ")
	}
	var api []string
	for _, file := range files {
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && d.Recv == nil {
					api = append(api, fmt.Sprintf("func %s(%s) (%s)", d.Name, types(d.Type.Params), types(d.Type.Results)))
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch sp := spec.(type) {
					case *ast.TypeSpec:
						if st, ok := sp.Type.(*ast.StructType); ok && sp.Name.IsExported() {
							for _, f := range st.Fields.List {
								for _, name := range f.Names {
									api = append(api, fmt.Sprintf("type %s field %s %s", sp.Name, name, text(f.Type)))
								}
							}
						} else if sp.Name.IsExported() {
							api = append(api, "type "+sp.Name.Name+" "+text(sp.Type))
						}
					case *ast.ValueSpec:
						for _, name := range sp.Names {
							if name.IsExported() {
								api = append(api, d.Tok.String()+" "+name.Name)
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(api)
	return api
}

// The package's exported API is Beam's io/pubsubio's, declaration for
// declaration, read from Beam's source at the version this module
// requires.
func TestExportedAPIIsBeams(t *testing.T) {
	beamAPI, ours := exportedAPI(t, beamPackageDir(t)), exportedAPI(t, ".")
	if diff := cmp.Diff(beamAPI, ours); diff != "" {
		t.Errorf("exported API (-Beam's +ours):\n%s", diff)
	}
	if len(beamAPI) < 7 { // Read, Write, and the five fields of ReadOptions
		t.Errorf("found only %v in Beam's package; the comparison reads nothing", beamAPI)
	}
}

// beamPanics are the messages Beam's package panics with, read from its
// source: the string literals passed to panic, directly or through
// fmt.Sprintf.
func beamPanics(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), beamPackageDir(t)+"/pubsubio.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || fmt.Sprint(call.Fun) != "panic" {
			return true
		}
		ast.Inspect(call.Args[0], func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				msgs = append(msgs, s)
				return false
			}
			return true
		})
		return true
	})
	return msgs
}

// panicOf returns what f panicked with, "" if it did not.
func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// The same misuse panics with Beam's messages.
func TestPanicsLikeBeams(t *testing.T) {
	msgs := beamPanics(t)
	if len(msgs) != 2 {
		t.Fatalf("Beam's package panics with %q; this test knows two messages", msgs)
	}
	exactlyOne, wrongType := msgs[0], msgs[1]
	for _, opts := range []pubsubio.ReadOptions{{}, {Topic: "t", Subscription: "s"}} {
		_, s := beam.NewPipelineWithRoot()
		if got := panicOf(func() { pubsubio.Read(s, "p", opts) }); got != exactlyOne {
			t.Errorf("Read(%+v) panicked with %q, want Beam's %q", opts, got, exactlyOne)
		}
	}
	_, s := beam.NewPipelineWithRoot()
	want := fmt.Sprintf(wrongType, reflect.TypeOf((*pubsubpb.PubsubMessage)(nil)), reflect.TypeOf([]byte(nil)), reflect.TypeOf(""))
	if got := panicOf(func() { pubsubio.Write(s, "p", "t", beam.Create(s, "x")) }); got != want {
		t.Errorf("Write(PCollection<string>) panicked with %q, want Beam's %q", got, want)
	}
}

// On Dataflow the native transforms connect as the job's service account,
// so the connection flags, which they would ignore, are refused; with
// --pubsubio_portable_on_dataflow they apply.
func TestDataflowRefusesConnectionFlags(t *testing.T) {
	set := func(name, value string) {
		prev := flag.Lookup(name).Value.String()
		if err := flag.Set(name, value); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = flag.Set(name, prev) })
	}
	set("runner", "DataflowRunner")
	set("pubsubio_emulator", "localhost:8085")
	_, s := beam.NewPipelineWithRoot()
	got := panicOf(func() { pubsubio.Read(s, "my-project", pubsubio.ReadOptions{Subscription: "orders"}) })
	if !strings.Contains(got, "--pubsubio_emulator and --pubsubio_credentials_file apply to pubsubio's portable implementation") {
		t.Errorf("Read on Dataflow with --pubsubio_emulator panicked with %q, want the flags refused", got)
	}
	set("pubsubio_portable_on_dataflow", "true")
	if got := panicOf(func() { pubsubio.Read(s, "my-project", pubsubio.ReadOptions{Subscription: "orders"}) }); got != "" {
		t.Errorf("Read on Dataflow with --pubsubio_portable_on_dataflow panicked: %s", got)
	}
	set("pubsubio_emulator", "localhost")
	if got := panicOf(func() { pubsubio.Write(s, "my-project", "events", beam.Create(s, []byte("x"))) }); !strings.Contains(got, `EmulatorEndpoint "localhost" is not host:port`) {
		t.Errorf("Write with --pubsubio_emulator=localhost panicked with %q, want the endpoint refused", got)
	}
}
