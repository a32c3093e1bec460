// Package gosource parses a package's library files, for the tests that
// hold the public API to its list and its rules.
package gosource

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// ParseDir parses the Go files in dir that are not tests, with mode (for
// example parser.ParseComments).
func ParseDir(dir string, mode parser.Mode) (*token.FileSet, []*ast.File, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, mode)
			if err != nil {
				return nil, nil, err
			}
			files = append(files, f)
		}
	}
	return fset, files, nil
}
