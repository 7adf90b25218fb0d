package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/bootlet/bootlet/podapi"
)

// ErrorMessage shows the server's Status message, not a Go error chain.
func ErrorMessage(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		// An Invalid status's message already names every cause.
		return st.Status().Message
	}
	return err.Error()
}

func Client(server *string) (*kubernetes.Clientset, error) {
	return newClient(podapi.ServerFromEnv(*server))
}

// NamespacedClient is client, with an empty --namespace made "default".
func NamespacedClient(server *string, namespace *string) (*kubernetes.Clientset, error) {
	if *namespace == "" {
		*namespace = metav1.NamespaceDefault
	}
	return Client(server)
}

// ReadManifests decodes every document of every file (a directory is read
// in name order, "-" is stdin) into typed objects.
func ReadManifests(paths []string) ([]runtime.Object, error) {
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

type GetOptions struct {
	Namespace     string
	AllNamespaces bool
	Output        string
	Selector      string
}

func (o *GetOptions) NS() string {
	if o.AllNamespaces {
		return ""
	}
	if o.Namespace == "" {
		return metav1.NamespaceDefault
	}
	return o.Namespace
}

func NormalizeResource(r string) string {
	switch strings.ToLower(r) {
	case "po", "pod", "pods":
		return "pods"
	case "secret", "secrets":
		return "secrets"
	case "cm", "configmap", "configmaps":
		return "configmaps"
	case "ev", "event", "events":
		return "events"
	case "ns", "namespace", "namespaces":
		return "namespaces"
	case "no", "node", "nodes":
		return "nodes"
	}
	return r
}

// DefaultAssetDir is kubeadm's /etc/kubernetes, the layout render writes.
const DefaultAssetDir = "/etc/kubernetes"
