package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	btypes "github.com/bootlet/bootlet/types"
)

// PrintGet prints what get fetched (podclient.Get) in the format o.Output
// names: the table (wide), yaml, json or name.
func PrintGet(obj runtime.Object, resource string, o *GetOptions, out io.Writer) error {
	switch o.Output {
	case "json":
		b, _ := json.MarshalIndent(WithKind(obj), "", "    ")
		_, err := fmt.Fprintln(out, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(WithKind(obj))
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	case "name":
		return printNames(obj, resource, out)
	case "", "wide":
		return PrintTable(obj, o, out)
	}
	return fmt.Errorf("unknown output format %q (wide|yaml|json|name)", o.Output)
}

// WithKind restores TypeMeta client-go strips from decoded objects.
func WithKind(obj runtime.Object) runtime.Object {
	kinds := map[string]string{"*v1.Pod": "Pod", "*v1.PodList": "List", "*v1.Secret": "Secret", "*v1.SecretList": "List",
		"*v1.ConfigMap": "ConfigMap", "*v1.ConfigMapList": "List", "*v1.EventList": "List", "*v1.NamespaceList": "List",
		"*v1.Node": "Node", "*v1.NodeList": "List"}
	if k, ok := kinds[fmt.Sprintf("%T", obj)]; ok {
		obj.GetObjectKind().SetGroupVersionKind(v1.SchemeGroupVersion.WithKind(k))
	}
	return obj
}

func printNames(obj runtime.Object, resource string, out io.Writer) error {
	prefix := strings.TrimSuffix(resource, "s") + "/"
	objs := []runtime.Object{obj}
	if meta.IsListType(obj) {
		items, err := meta.ExtractList(obj)
		if err != nil {
			return fmt.Errorf("-o name is not supported for %s: %w", resource, err)
		}
		objs = items
	}
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			return fmt.Errorf("-o name is not supported for %s", resource)
		}
		fmt.Fprintln(out, prefix+m.GetName())
	}
	return nil
}

func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

func PrintTable(obj runtime.Object, o *GetOptions, out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	defer w.Flush()
	nsCol := func(ns string) string {
		if o.AllNamespaces {
			return ns + "\t"
		}
		return ""
	}
	nsHead := ""
	if o.AllNamespaces {
		nsHead = "NAMESPACE\t"
	}
	switch l := obj.(type) {
	case *v1.Pod:
		return PrintTable(&v1.PodList{Items: []v1.Pod{*l}}, o, out)
	case *v1.PodList:
		if len(l.Items) == 0 {
			fmt.Fprintln(out, "No resources found")
			return nil
		}
		head := nsHead + "NAME\tREADY\tSTATUS\tRESTARTS\tAGE\tOWNER"
		if o.Output == "wide" {
			head += "\tIP\tNODE\tUID"
		}
		fmt.Fprintln(w, head)
		for _, p := range l.Items {
			ready, restarts := 0, int32(0)
			for _, c := range p.Status.ContainerStatuses {
				if c.Ready {
					ready++
				}
				restarts += c.RestartCount
			}
			row := fmt.Sprintf("%s%s\t%d/%d\t%s\t%d\t%s\t%s", nsCol(p.Namespace), p.Name, ready, len(p.Spec.Containers), PodStatusString(&p), restarts, age(p.CreationTimestamp), ownerColumn(&p))
			if o.Output == "wide" {
				ip := p.Status.PodIP
				if ip == "" {
					ip = "<none>"
				}
				row += fmt.Sprintf("\t%s\t%s\t%s", ip, p.Spec.NodeName, p.UID)
			}
			fmt.Fprintln(w, row)
		}
	case *v1.Secret:
		return PrintTable(&v1.SecretList{Items: []v1.Secret{*l}}, o, out)
	case *v1.SecretList:
		fmt.Fprintln(w, nsHead+"NAME\tTYPE\tDATA\tAGE")
		for _, s := range l.Items {
			fmt.Fprintf(w, "%s%s\t%s\t%d\t%s\n", nsCol(s.Namespace), s.Name, s.Type, len(s.Data), age(s.CreationTimestamp))
		}
	case *v1.ConfigMap:
		return PrintTable(&v1.ConfigMapList{Items: []v1.ConfigMap{*l}}, o, out)
	case *v1.ConfigMapList:
		fmt.Fprintln(w, nsHead+"NAME\tDATA\tAGE")
		for _, c := range l.Items {
			fmt.Fprintf(w, "%s%s\t%d\t%s\n", nsCol(c.Namespace), c.Name, len(c.Data)+len(c.BinaryData), age(c.CreationTimestamp))
		}
	case *v1.EventList:
		fmt.Fprintln(w, nsHead+"LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE")
		for _, e := range l.Items {
			fmt.Fprintf(w, "%s%s\t%s\t%s\t%s/%s\t%s\n", nsCol(e.Namespace), age(e.LastTimestamp), e.Type, e.Reason, strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name, e.Message)
		}
	case *v1.NamespaceList:
		fmt.Fprintln(w, "NAME\tSTATUS")
		for _, n := range l.Items {
			fmt.Fprintf(w, "%s\t%s\n", n.Name, n.Status.Phase)
		}
	case *v1.Node:
		return PrintTable(&v1.NodeList{Items: []v1.Node{*l}}, o, out)
	case *v1.NodeList:
		fmt.Fprintln(w, "NAME\tSTATUS\tPHASE\tAGE\tVERSION")
		for _, n := range l.Items {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", n.Name, nodeReady(&n), NodePhase(&n), age(n.CreationTimestamp), n.Status.NodeInfo.KubeletVersion)
		}
	}
	return nil
}

// PodStatusString is kubectl's STATUS column: the most telling container
// reason, else the phase, Terminating while being deleted.
func PodStatusString(p *v1.Pod) string {
	reason := string(p.Status.Phase)
	if p.Status.Reason != "" {
		reason = p.Status.Reason
	}
	for i, c := range p.Status.InitContainerStatuses {
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case c.State.Terminated != nil:
			reason = "Init:" + c.State.Terminated.Reason
			if c.State.Terminated.Reason == "" {
				reason = fmt.Sprintf("Init:ExitCode:%d", c.State.Terminated.ExitCode)
			}
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + c.State.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(p.Spec.InitContainers))
		}
		return reason
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Waiting != nil && c.State.Waiting.Reason != "" {
			reason = c.State.Waiting.Reason
		} else if c.State.Terminated != nil && c.State.Terminated.Reason != "" {
			reason = c.State.Terminated.Reason
		}
	}
	if p.DeletionTimestamp != nil {
		reason = "Terminating"
	}
	return reason
}

// nodeReady is kubectl's STATUS of a node: its Ready condition.
func nodeReady(n *v1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			if c.Status == v1.ConditionTrue {
				return "Ready"
			}
			return "NotReady"
		}
	}
	return "Unknown"
}

// NodePhase is the node's phase in bootlet's lifecycle, as the daemon
// decided it (nodephase.Source).
func NodePhase(n *v1.Node) string {
	if p := n.Annotations[btypes.AnnotationPhase]; p != "" {
		return p
	}
	return "<unknown>"
}

// ownerColumn is the OWNER of a pod: who runs it, and for a pod the
// checkpointer runs, which self-hosted component it stands in for.
func ownerColumn(p *v1.Pod) string {
	if of := p.Annotations[btypes.AnnotationCheckpointOf]; of != "" {
		return string(btypes.OwnerOf(p)) + ",checkpoint-of=" + of
	}
	return string(btypes.OwnerOf(p))
}
