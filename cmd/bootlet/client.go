package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/podapi"
)

// errorMessage shows the server's Status message, not a Go error chain.
func errorMessage(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		// An Invalid status's message already names every cause.
		return st.Status().Message
	}
	return err.Error()
}

func client(server *string) (*kubernetes.Clientset, error) {
	return newClient(podapi.ServerFromEnv(*server))
}

// namespacedClient is client, with an empty --namespace made "default".
func namespacedClient(server *string, namespace *string) (*kubernetes.Clientset, error) {
	if *namespace == "" {
		*namespace = metav1.NamespaceDefault
	}
	return client(server)
}

// readManifests decodes every document of every file (a directory is read
// in name order, "-" is stdin) into typed objects.
func readManifests(paths []string) ([]runtime.Object, error) {
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

func newApplyCmd(server *string) *cobra.Command {
	var files []string
	var namespace string
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Create or update pods, secrets and configmaps from manifests",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("must specify -f")
			}
			cs, err := client(server)
			if err != nil {
				return err
			}
			objs, err := readManifests(files)
			if err != nil {
				return err
			}
			var failed bool
			for _, obj := range objs {
				msg, err := applyOne(cmd.Context(), cs, obj, namespace)
				if err != nil {
					fmt.Fprintln(os.Stderr, "error:", errorMessage(err))
					failed = true
					continue
				}
				fmt.Println(msg)
			}
			if failed {
				return fmt.Errorf("some objects were not applied")
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "manifest file, directory or - for stdin")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace for objects that name none")
	return cmd
}

// applyOne creates the object, or replaces it when it exists and differs.
func applyOne(ctx context.Context, cs *kubernetes.Clientset, obj runtime.Object, ns string) (string, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	pick := func(objNS string) string {
		if objNS != "" {
			return objNS
		}
		if ns != "" {
			return ns
		}
		return metav1.NamespaceDefault
	}
	switch o := obj.(type) {
	case *v1.Pod:
		o.Namespace = pick(o.Namespace)
		return createOrReplace(ctx, cs.CoreV1().Pods(o.Namespace), "pod", o, func(cur *v1.Pod) (*v1.Pod, bool) {
			// Only what a pod update may change: labels, annotations, images.
			want := cur.DeepCopy()
			want.Labels, want.Annotations = o.Labels, mergeAnnotations(cur.Annotations, o.Annotations)
			setImages(want.Spec.Containers, o.Spec.Containers)
			setImages(want.Spec.InitContainers, o.Spec.InitContainers)
			return want, apiequality.Semantic.DeepEqual(want.Spec, cur.Spec) && apiequality.Semantic.DeepEqual(want.ObjectMeta, cur.ObjectMeta)
		})
	case *v1.Secret:
		o.Namespace = pick(o.Namespace)
		return createOrReplace(ctx, cs.CoreV1().Secrets(o.Namespace), "secret", o, func(cur *v1.Secret) (*v1.Secret, bool) {
			o.ResourceVersion = cur.ResourceVersion
			return o, false // stringData cannot be compared with data client-side
		})
	case *v1.ConfigMap:
		o.Namespace = pick(o.Namespace)
		return createOrReplace(ctx, cs.CoreV1().ConfigMaps(o.Namespace), "configmap", o, func(cur *v1.ConfigMap) (*v1.ConfigMap, bool) {
			o.ResourceVersion = cur.ResourceVersion
			return o, apiequality.Semantic.DeepEqual(cur.Data, o.Data) && apiequality.Semantic.DeepEqual(cur.BinaryData, o.BinaryData) &&
				apiequality.Semantic.DeepEqual(cur.Labels, o.Labels)
		})
	}
	return "", fmt.Errorf("unsupported object %T", obj)
}

// typedClient is the part of a client-go typed client createOrReplace uses.
type typedClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// createOrReplace creates obj if absent; otherwise update turns the current
// object into the one to PUT and says whether nothing would change.
func createOrReplace[T metav1.Object](ctx context.Context, api typedClient[T], kind string, obj T, update func(cur T) (T, bool)) (string, error) {
	ref := kind + "/" + obj.GetName()
	cur, err := api.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = api.Create(ctx, obj, metav1.CreateOptions{})
		return ref + " created", err
	}
	if err != nil {
		return "", err
	}
	want, unchanged := update(cur)
	if unchanged {
		return ref + " unchanged", nil
	}
	_, err = api.Update(ctx, want, metav1.UpdateOptions{})
	return ref + " configured", err
}

func setImages(dst, src []v1.Container) {
	for i := range dst {
		for _, c := range src {
			if c.Name == dst[i].Name {
				dst[i].Image = c.Image
			}
		}
	}
}

func mergeAnnotations(cur, want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range cur {
		if strings.HasPrefix(k, "kubernetes.io/config.") || strings.HasPrefix(k, "bootlet.dev/") {
			out[k] = v
		}
	}
	for k, v := range want {
		out[k] = v
	}
	return out
}

type getOptions struct {
	namespace     string
	allNamespaces bool
	output        string
	selector      string
}

func (o *getOptions) ns() string {
	if o.allNamespaces {
		return ""
	}
	if o.namespace == "" {
		return metav1.NamespaceDefault
	}
	return o.namespace
}

func newGetCmd(server *string) *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get (pods|secrets|configmaps|events|namespaces|nodes) [NAME]",
		Short: "Display objects",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, err := client(server)
			if err != nil {
				return err
			}
			name := ""
			if len(args) == 2 {
				name = args[1]
			}
			return runGet(cmd.Context(), cs, normalizeResource(args[0]), name, o, os.Stdout)
		},
	}
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "", "namespace")
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list across all namespaces")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: wide|yaml|json|name")
	cmd.Flags().StringVarP(&o.selector, "selector", "l", "", "label selector")
	return cmd
}

func normalizeResource(r string) string {
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

func newDeleteCmd(server *string) *cobra.Command {
	var namespace string
	var grace int64
	var wait bool
	cmd := &cobra.Command{
		Use:   "delete (pod|secret|configmap) NAME...",
		Short: "Delete objects; pods are stopped gracefully",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, err := namespacedClient(server, &namespace)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			opts := metav1.DeleteOptions{}
			if grace >= 0 {
				opts.GracePeriodSeconds = &grace
			}
			res := normalizeResource(args[0])
			for _, name := range args[1:] {
				switch res {
				case "pods":
					err = cs.CoreV1().Pods(namespace).Delete(ctx, name, opts)
				case "secrets":
					err = cs.CoreV1().Secrets(namespace).Delete(ctx, name, opts)
				case "configmaps":
					err = cs.CoreV1().ConfigMaps(namespace).Delete(ctx, name, opts)
				default:
					return fmt.Errorf("cannot delete %q", args[0])
				}
				if err != nil {
					return err
				}
				singular := strings.TrimSuffix(res, "s")
				fmt.Printf("%s %q deleted\n", singular, name)
				if res == "pods" && wait {
					for {
						if _, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
							break
						}
						time.Sleep(200 * time.Millisecond)
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace")
	cmd.Flags().Int64Var(&grace, "grace-period", -1, "seconds given to the pod to terminate (-1: the pod's own)")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the pod is gone")
	return cmd
}

func newLogsCmd(server *string) *cobra.Command {
	var namespace, container string
	var follow, previous, timestamps bool
	var tail int64
	cmd := &cobra.Command{
		Use:   "logs POD",
		Short: "Print a container's logs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, err := namespacedClient(server, &namespace)
			if err != nil {
				return err
			}
			opts := &v1.PodLogOptions{Container: container, Follow: follow, Previous: previous, Timestamps: timestamps}
			if tail >= 0 {
				opts.TailLines = &tail
			}
			rc, err := cs.CoreV1().Pods(namespace).GetLogs(args[0], opts).Stream(cmd.Context())
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(os.Stdout, rc)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", "", "namespace")
	f.StringVarP(&container, "container", "c", "", "container name")
	f.BoolVarP(&follow, "follow", "f", false, "stream new lines")
	f.BoolVarP(&previous, "previous", "p", false, "the previous, terminated container")
	f.BoolVar(&timestamps, "timestamps", false, "prefix lines with timestamps")
	f.Int64Var(&tail, "tail", -1, "lines from the end to show")
	return cmd
}

func newImagesCmd() *cobra.Command {
	var address string
	cmd := &cobra.Command{Use: "images", Short: "Manage images in the runtime"}
	imp := &cobra.Command{
		Use:   "import FILE...",
		Short: "Import OCI or docker image archives into containerd's k8s.io namespace",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var files []string
			for _, a := range args {
				if fi, err := os.Stat(a); err == nil && fi.IsDir() {
					more, err := cri.ArchivesIn(a)
					if err != nil {
						return err
					}
					files = append(files, more...)
				} else {
					files = append(files, a)
				}
			}
			sort.Strings(files)
			names, err := cri.ImportArchives(cmd.Context(), address, files)
			for _, n := range names {
				fmt.Println("imported", n)
			}
			return err
		},
	}
	imp.Flags().StringVar(&address, "address", "/run/containerd/containerd.sock", "containerd socket")
	cmd.AddCommand(imp)
	return cmd
}
