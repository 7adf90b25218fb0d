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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/podapi/podclient"
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

// runStatus shows what the daemon serves (podclient.Status): the phase
// from its Node object (the daemon decides it, nodephase.Source), the pods
// with their OWNER (the `get pods -A` table), and /readyz. A daemon that
// does not serve its Node (older than this CLI) still gets the rest.
func runStatus(ctx context.Context, cs kubernetes.Interface, output string, out io.Writer) error {
	if output != "" && output != "json" && output != "yaml" {
		return fmt.Errorf("unknown output format %q (yaml|json)", output)
	}
	st, err := podclient.Status(ctx, cs)
	if err != nil {
		return err
	}
	if output != "" {
		list := &v1.List{TypeMeta: metav1.TypeMeta{Kind: "List", APIVersion: "v1"}}
		var objs []runtime.Object
		for i := range st.Nodes {
			objs = append(objs, &st.Nodes[i])
		}
		for i := range st.Pods.Items {
			objs = append(objs, &st.Pods.Items[i])
		}
		for _, o := range objs {
			list.Items = append(list.Items, runtime.RawExtension{Object: cli.WithKind(o)})
		}
		return printList(list, output, out)
	}
	fmt.Fprintf(out, "server: %s\n", st.ServerVersion)
	if len(st.Nodes) == 0 {
		fmt.Fprintln(out, "phase: unknown (the daemon does not serve its Node: it is older than this CLI)")
	} else {
		printPhase(&st.Nodes[0], time.Now(), out)
	}
	fmt.Fprintln(out)
	if err := cli.PrintTable(st.Pods, &cli.GetOptions{AllNamespaces: true}, out); err != nil {
		return err
	}
	fmt.Fprintln(out)
	_, _ = out.Write(st.Readyz)
	if st.ReadyErr != nil {
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
