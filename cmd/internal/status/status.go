package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	btypes "github.com/bootlet/bootlet/types"
)

func NewCommand(server *string) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the node's phase in the lifecycle, each pod's owner, and the daemon's readiness checks",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, err := cli.Client(server)
			if err != nil {
				return err
			}
			return runStatus(cmd.Context(), cs, output, os.Stdout)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: yaml|json (a List of the Node and the pods)")
	return cmd
}

// runStatus shows what the daemon serves: the phase from its Node object
// (the daemon decides it, nodephase.Source), the pods with their OWNER
// (the `get pods -A` table), and /readyz. A daemon that does not serve its
// Node (older than this CLI) still gets the rest.
func runStatus(ctx context.Context, cs kubernetes.Interface, output string, out io.Writer) error {
	if output != "" && output != "json" && output != "yaml" {
		return fmt.Errorf("unknown output format %q (yaml|json)", output)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if output != "" {
		list := &v1.List{TypeMeta: metav1.TypeMeta{Kind: "List", APIVersion: "v1"}}
		var objs []runtime.Object
		if nodes != nil {
			for i := range nodes.Items {
				objs = append(objs, &nodes.Items[i])
			}
		}
		for i := range pods.Items {
			objs = append(objs, &pods.Items[i])
		}
		for _, o := range objs {
			list.Items = append(list.Items, runtime.RawExtension{Object: cli.WithKind(o)})
		}
		return printList(list, output, out)
	}

	fmt.Fprintf(out, "server: %s\n", v.GitVersion)
	if nodes == nil || len(nodes.Items) == 0 {
		fmt.Fprintln(out, "phase: unknown (the daemon does not serve its Node: it is older than this CLI)")
	} else {
		printPhase(&nodes.Items[0], time.Now(), out)
	}
	fmt.Fprintln(out)
	if err := cli.PrintTable(pods, &cli.GetOptions{AllNamespaces: true}, out); err != nil {
		return err
	}
	fmt.Fprintln(out)
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/readyz").Param("verbose", "").DoRaw(ctx)
	_, _ = out.Write(body)
	if err != nil {
		return errors.New("not ready")
	}
	return nil
}

// printPhase prints the node's name, phase (with how long it has held)
// and the reason, from the Node's bootlet.dev/phase annotation and
// BootletPhase condition.
func printPhase(n *v1.Node, now time.Time, out io.Writer) {
	fmt.Fprintf(out, "node: %s\n", n.Name)
	phase := cli.NodePhase(n)
	for _, c := range n.Status.Conditions {
		if c.Type != btypes.NodeConditionPhase {
			continue
		}
		if !c.LastTransitionTime.IsZero() {
			phase += fmt.Sprintf(" (for %s)", duration.HumanDuration(now.Sub(c.LastTransitionTime.Time)))
		}
		fmt.Fprintf(out, "phase: %s\nreason: %s\n", phase, c.Message)
		return
	}
	fmt.Fprintf(out, "phase: %s\n", phase)
}

func printList(list *v1.List, output string, out io.Writer) error {
	if output == "json" {
		b, err := json.MarshalIndent(list, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(b))
		return err
	}
	b, err := yaml.Marshal(list)
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}
