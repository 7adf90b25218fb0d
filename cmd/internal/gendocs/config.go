package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"

	"github.com/spf13/pflag"

	"github.com/bootlet/bootlet/cmd/internal/daemon"
	"github.com/bootlet/bootlet/config"
)

// configReference is config.md: one row per field of the file, nested
// structs flattened to dotted paths as the file nests them.
func configReference(typesFile string, daemonFlags *pflag.FlagSet) ([]byte, error) {
	docs, err := fieldDocs(typesFile)
	if err != nil {
		return nil, err
	}
	flags := daemon.ConfigFlags()
	var b bytes.Buffer
	fmt.Fprintf(&b, `# The daemon's configuration file

Generated from the code by `+"`make docs`"+` (the BootletConfiguration types in `+"`config/types.go`"+`);
do not edit. `+"`bootlet daemon --config FILE`"+` reads it, apiVersion %s, kind %s; a flag given
on the command line wins over the file ([configuration.md](../configuration.md) explains the
precedence and the defaults; `+"`bootlet daemon --write-config-to -`"+` prints the effective file).

| field | type | flag | meaning |
|-------|------|------|---------|
`, config.SchemeGroupVersion.String(), config.Kind)
	var rows func(t reflect.Type, prefix string)
	rows = func(t reflect.Type, prefix string) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue // inline (TypeMeta) or not in the file
			}
			path := prefix + name
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() {
				rows(ft, path+".")
				continue
			}
			flagName, meaning := flags[path], docs[t.Name()+"."+f.Name]
			if meaning == "" && flagName != "" {
				if fl := daemonFlags.Lookup(flagName); fl != nil {
					meaning = fl.Usage
				}
			}
			flagCell := ""
			if flagName != "" {
				flagCell = "`--" + flagName + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", path, typeName(f.Type), flagCell, cell(meaning))
		}
	}
	rows(reflect.TypeOf(config.BootletConfiguration{}), "")
	return b.Bytes(), nil
}

// fieldDocs are the doc comments of the struct fields in file, by
// TYPE.FIELD; a comment above a group of fields names them all and is
// given to the first.
func fieldDocs(file string) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, field := range st.Fields.List {
			if field.Doc == nil {
				continue
			}
			for _, name := range field.Names {
				out[ts.Name.Name+"."+name.Name] = strings.Join(strings.Fields(field.Doc.Text()), " ")
			}
		}
		return false
	})
	return out, nil
}

// typeName is a field's type as the file spells a value of it.
func typeName(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Name() == "Duration":
		return "duration (`30s`, `5m`)"
	case t.Kind() == reflect.Slice:
		return "list of " + typeName(t.Elem())
	case t.Kind() == reflect.Int32:
		return "integer"
	case t.Kind() == reflect.Bool:
		return "boolean"
	}
	return t.Kind().String()
}

// cell keeps a table cell on one line.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}
