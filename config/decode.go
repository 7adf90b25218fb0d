package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Decode reads a BootletConfiguration (YAML or JSON) and defaults it.
// Relative paths in it are made absolute against dir, the file's
// directory (the kubelet does the same with its config file), so the
// file means the same whatever the daemon's working directory.
//
// Decoding is strict, as apimachinery's strict serializer is (the same two
// steps, on a type that needs no scheme): a duplicate key, an unknown
// field or a field in the wrong case is an error that names each of them;
// a value of the wrong type or a bad duration fails at once.
func Decode(data []byte, dir string) (*BootletConfiguration, error) {
	// YAMLToJSON reads the first document only: a second one would be
	// dropped without a word.
	if n, err := yamlDocuments(data); err != nil {
		return nil, err
	} else if n > 1 {
		return nil, fmt.Errorf("%d YAML documents: a BootletConfiguration file holds one", n)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	var tm metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return nil, err
	}
	if want := SchemeGroupVersion.String(); tm.APIVersion != want || tm.Kind != Kind {
		return nil, fmt.Errorf("apiVersion %q, kind %q: want apiVersion %s, kind %s", tm.APIVersion, tm.Kind, want, Kind)
	}
	c := &BootletConfiguration{}
	var strictErrs []error
	if _, err := yaml.YAMLToJSONStrict(data); err != nil {
		strictErrs = append(strictErrs, err)
	}
	unknown, err := kjson.UnmarshalStrict(js, c)
	if err != nil {
		return nil, namedDurationError(js, err)
	}
	if strictErrs = append(strictErrs, unknown...); len(strictErrs) > 0 {
		return nil, runtime.NewStrictDecodingError(strictErrs)
	}
	for _, p := range PathRefs(c) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	SetDefaults(c)
	return c, nil
}

// PathRefs are the fields that name a file or directory on the node.
func PathRefs(c *BootletConfiguration) []*string {
	refs := []*string{
		&c.RootDir, &c.PodRootDir, &c.PodLogDir, &c.Socket, &c.ReadOnlySocket,
		&c.ManifestsDir, &c.PreloadImages,
		&c.Listen.TLSCertFile, &c.Listen.TLSPrivateKeyFile, &c.Listen.ClientCAFile, &c.Listen.ClientCAKeyFile,
		&c.Handoff.KubeletRootDir,
		&c.Pivot.Kubeconfig, &c.Pivot.SelfHostedAssets,
		&c.Checkpointer.Kubeconfig,
	}
	for _, p := range []*string{c.ContainerLogDir, c.Handoff.KubeletStaticPodPath} {
		if p != nil {
			refs = append(refs, p)
		}
	}
	return refs
}

// Encode is the file form of c: YAML, keys sorted as kubeadm's `config
// print` prints component configs, every field of a defaulted c present.
func Encode(c *BootletConfiguration) ([]byte, error) {
	return yaml.Marshal(c)
}

// namedDurationError names the field of a bad duration: metav1.Duration's
// own decoder reports only time.ParseDuration's message, and in a file of
// ten durations that leaves the reader searching. Other errors (a wrong
// type) already name their field and pass through.
func namedDurationError(js []byte, err error) error {
	var doc map[string]any
	if kjson.UnmarshalCaseSensitivePreserveInts(js, &doc) != nil {
		return err
	}
	if bad := badDuration(nil, reflect.TypeOf(BootletConfiguration{}), doc); bad != nil {
		return bad
	}
	return err
}

var durationType = reflect.TypeOf(metav1.Duration{})

func badDuration(p *field.Path, t reflect.Type, doc map[string]any) *field.Error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		v, ok := doc[name]
		if !ok || v == nil {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft == durationType:
			s, isString := v.(string)
			if !isString {
				return field.Invalid(p.Child(name), v, `must be a duration string such as "10s"`)
			}
			if _, perr := time.ParseDuration(s); perr != nil {
				return field.Invalid(p.Child(name), s, perr.Error())
			}
		case ft.Kind() == reflect.Struct && name != "":
			if sub, isMap := v.(map[string]any); isMap {
				if bad := badDuration(p.Child(name), ft, sub); bad != nil {
					return bad
				}
			}
		}
	}
	return nil
}

// yamlDocuments counts the documents of data that hold more than comments
// and blank lines.
func yamlDocuments(data []byte) (int, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	n := 0
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		for _, line := range strings.Split(string(doc), "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") && l != "---" {
				n++
				break
			}
		}
	}
}
