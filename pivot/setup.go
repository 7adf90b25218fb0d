package pivot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/credmirror"
	"github.com/bootlet/bootlet/internal/retry"
	btypes "github.com/bootlet/bootlet/types"
)

// Before the rounds: the apiserver answers, the self-hosted objects exist,
// this node carries the control-plane label.

// waitAPIServer polls the apiserver's /readyz until it answers ok; false
// when ctx ends first.
func waitAPIServer(ctx context.Context, kube kubernetes.Interface) bool {
	logged := false
	return retry.Doubling(ctx, 500*time.Millisecond, 5*time.Second, func() error {
		body, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) != "ok" {
			err = fmt.Errorf("/readyz answered %q", body)
		}
		return err
	}, func(err error, _ time.Duration) {
		if !logged {
			klog.InfoS("Pivot: waiting for the apiserver", "err", err)
			logged = true
		}
	})
}

// retryUntil runs f until it succeeds (logging each failure) or ctx ends.
func retryUntil(ctx context.Context, what string, f func() error) bool {
	return retry.Doubling(ctx, time.Second, 2*time.Second, f, func(err error, next time.Duration) {
		klog.ErrorS(err, what+" failed; retrying", "in", next)
	})
}

// createSelfHosted creates every object of the YAML files in dir (sorted by
// file name, in file order) that does not exist yet. An existing object is
// left as it is: it may have been upgraded since (kubectl set image), and a
// restarted bootlet must not roll it back.
func createSelfHosted(ctx context.Context, rc *rest.Config, kube kubernetes.Interface, dir string) error {
	objs, err := readObjects(dir)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return fmt.Errorf("--self-hosted-assets %s holds no objects", dir)
	}
	// The self-hosted pods mount their credentials from this master's
	// disk, not from their Secrets: seed those directories before the
	// workloads exist (package credmirror).
	if err := credmirror.Seed(objs); err != nil {
		return fmt.Errorf("seeding the credential directories: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	created, existed, err := createObjects(ctx, dyn, mapper, objs)
	if err != nil {
		return err
	}
	klog.InfoS("Self-hosted objects in place", "dir", dir, "created", created, "alreadyExisted", existed)
	return nil
}

// createObjects creates each object that does not exist yet, in order, and
// stops at the first other error, naming the object.
func createObjects(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, objs []*unstructured.Unstructured) (created, existed int, err error) {
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return created, existed, fmt.Errorf("%s %s: %w", gvk.Kind, klog.KObj(o), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := o.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		_, err = ri.Create(ctx, o, metav1.CreateOptions{FieldManager: pivotFieldManager})
		switch {
		case err == nil:
			created++
			klog.InfoS("Created a self-hosted object", "kind", gvk.Kind, "object", klog.KObj(o))
		case apierrors.IsAlreadyExists(err):
			existed++
		default:
			// Another master's pivot may have created it: the apiserver
			// validates a Service's fixed clusterIP before its name, so a
			// second kube-dns is refused as Invalid ("provided IP is
			// already allocated"), not AlreadyExists, and a pivot that
			// stopped there would never label its node. An object that
			// exists is one not to create, whatever the error said.
			if _, gerr := ri.Get(ctx, o.GetName(), metav1.GetOptions{}); gerr == nil {
				existed++
				continue
			}
			return created, existed, fmt.Errorf("creating %s %s: %w", gvk.Kind, klog.KObj(o), err)
		}
	}
	return created, existed, nil
}

// readObjects decodes every document of dir's *.yaml and *.json files.
func readObjects(dir string) ([]*unstructured.Unstructured, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") || strings.HasSuffix(name, ".json")) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for i := 0; ; i++ {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				f.Close()
				return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
				f.Close()
				return nil, fmt.Errorf("%s: document %d: apiVersion, kind and metadata.name are required", name, i)
			}
			out = append(out, u)
		}
		f.Close()
	}
	return out, nil
}

// ownCheck is this node's bootstrap apiserver's address ("": none) and
// whether it answers /readyz there, and why not.
type ownCheck func(ctx context.Context) (addr string, serves bool, why string)

// waitNodeLabelled labels this node once the kubelet has registered it
// and DecideLabel lets it (this node's own bootstrap apiserver serves: own
// asks it), polling every 250 ms and logging each new reason to wait: the
// DaemonSets' pods and the Deployments' placements (one master) wait for
// the label, and the kubelet adopts the bootstrap pods within seconds of
// its registration. false when ctx ends first.
func waitNodeLabelled(ctx context.Context, kube kubernetes.Interface, node string, own ownCheck) bool {
	start := time.Now()
	waiting, lastWhy := false, ""
	for {
		n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		switch {
		case err == nil:
			// Both labels: a node an administrator labelled a master
			// before its first boot still needs the one its pods select.
			_, master := n.Labels[btypes.LabelControlPlane]
			_, pods := n.Labels[btypes.LabelControlPlanePods]
			labelled := master && pods
			f := LabelFacts{Labelled: labelled, Waited: time.Since(start)}
			if !labelled {
				f.Own, f.OwnServes, f.OwnWhy = own(ctx)
			}
			d := DecideLabel(f)
			if !d.Label {
				if d.Why != lastWhy {
					klog.InfoS("Pivot: not labelling this node yet", "node", node, "why", d.Why)
					lastWhy = d.Why
				}
				break
			}
			if labelled {
				return true
			}
			if err := labelControlPlane(ctx, kube, node); err != nil {
				klog.ErrorS(err, "Labelling this node as a control-plane node failed; retrying", "node", node)
				break
			}
			klog.InfoS("Labelled this node as a control-plane node", "node", node, "label", btypes.LabelControlPlane, "why", d.Why)
			return true
		case apierrors.IsNotFound(err):
			if !waiting {
				klog.InfoS("Pivot: waiting for the kubelet to register this node", "node", node)
				waiting = true
			}
		default:
			klog.ErrorS(err, "Reading this node failed; retrying", "node", node)
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ownAPIServer checks this node's bootstrap apiserver (the APIServer
// component's bootstrap pod in bootlet's registry, read at each call: the
// pivot may start before --manifests-dir is applied, though not before the
// kubelet registers the node) for /readyz on its own address with rc's
// credentials. Until the label lets a self-hosted apiserver start on this
// node, the bootstrap apiserver is the only one listening on its port here.
func ownAPIServer(rc *rest.Config, pods BootstrapPods, components []Component) ownCheck {
	var (
		addr string
		kube kubernetes.Interface
	)
	return func(ctx context.Context) (string, bool, string) {
		own := ""
		for _, c := range components {
			if !c.APIServer {
				continue
			}
			if p, err := pods.GetPod(c.Bootstrap.Namespace, c.Bootstrap.Name); err == nil {
				own = ownAddress(p)
			}
		}
		if own == "" {
			return "", false, ""
		}
		if own != addr {
			oc := rest.CopyConfig(rc)
			oc.Host = "https://" + own
			oc.Timeout = 5 * time.Second
			k, err := kubernetes.NewForConfig(oc)
			if err != nil {
				return own, false, "a client of it: " + err.Error()
			}
			addr, kube = own, k
		}
		body, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		switch {
		case err != nil:
			return own, false, err.Error()
		case string(body) != "ok":
			return own, false, fmt.Sprintf("answered %q", body)
		}
		return own, true, ""
	}
}

// labelControlPlane labels this node's Node object node-role.kubernetes.io/control-plane="", as
// kubeadm's mark-control-plane phase does, and with the label the
// self-hosted pods select (btypes.LabelControlPlanePods), which the
// masters' controller keeps afterwards. The kubelet may set neither on
// itself.
func labelControlPlane(ctx context.Context, kube kubernetes.Interface, node string) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"",%q:""}}}`, btypes.LabelControlPlane, btypes.LabelControlPlanePods)
	_, err := kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: pivotFieldManager})
	return err
}
