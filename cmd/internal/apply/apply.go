package apply

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/internal/manifestfile"
)

func NewCommand(server *string) *cobra.Command {
	var files []string
	var namespace string
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Create or update pods, secrets and configmaps from manifests",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("must specify -f")
			}
			cs, err := cli.Client(server)
			if err != nil {
				return err
			}
			objs, err := manifestfile.Read(files)
			if err != nil {
				return err
			}
			var failed bool
			for _, obj := range objs {
				msg, err := applyOne(cmd.Context(), cs, obj, namespace)
				if err != nil {
					fmt.Fprintln(os.Stderr, "error:", cli.ErrorMessage(err))
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
