// Command paramlimit lists the non-test functions of the given package
// directories that take more than -max parameters (the receiver not
// counted), and exits 1 when it lists any. make lint runs it on the core.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	limit := flag.Int("max", 6, "most parameters a function may take")
	flag.Parse()
	fset := token.NewFileSet()
	over := 0
	for _, dir := range flag.Args() {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				var typ *ast.FuncType
				what := "func literal"
				switch fn := n.(type) {
				case *ast.FuncDecl:
					typ, what = fn.Type, fn.Name.Name
				case *ast.FuncLit:
					typ = fn.Type
				default:
					return true
				}
				if c := count(typ.Params); c > *limit {
					over++
					fmt.Printf("%d %s %s\n", c, what, fset.Position(typ.Pos()))
				}
				return true
			})
		}
	}
	if over > 0 {
		os.Exit(1)
	}
}

func count(fl *ast.FieldList) int {
	n := 0
	for _, f := range fl.List {
		n += max(len(f.Names), 1)
	}
	return n
}
