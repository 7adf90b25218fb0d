// Package manifestfile reads manifest files the way `bootlet apply -f` and
// the daemon's --manifests-dir both take them: every YAML or JSON document
// of every file, directories in name order, "-" for stdin, into the typed
// objects bootlet serves (Pods, Secrets, ConfigMaps).
package manifestfile

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/kubectl/pkg/scheme"
)

// Read decodes every document of every file (a directory is read
// in name order, "-" is stdin) into typed objects.
func Read(paths []string) ([]runtime.Object, error) {
	var files []string
	for _, p := range paths {
		if p == "-" {
			files = append(files, p)
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			ext := filepath.Ext(e.Name())
			if !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	var objs []runtime.Object
	for _, f := range files {
		var r io.Reader
		if f == "-" {
			r = os.Stdin
		} else {
			fh, err := os.Open(f)
			if err != nil {
				return nil, err
			}
			defer fh.Close()
			r = fh
		}
		dec := utilyaml.NewYAMLReader(bufio.NewReader(r))
		for i := 0; ; i++ {
			doc, err := dec.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 || strings.TrimSpace(string(doc)) == "---" {
				continue
			}
			obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
			if err != nil {
				return nil, fmt.Errorf("%s (document %d): %w", f, i+1, err)
			}
			switch obj.(type) {
			case *v1.Pod, *v1.Secret, *v1.ConfigMap:
				objs = append(objs, obj)
			default:
				return nil, fmt.Errorf("%s (document %d): bootlet serves Pods, Secrets and ConfigMaps, not %s", f, i+1, gvk.Kind)
			}
		}
	}
	return objs, nil
}
