package checkpoint

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/cmd/internal/cli"
)

// NewCommand reads the checkpoint store directly, so it works while the
// daemon is down: the disaster-recovery view of what bootlet will run.
func NewCommand() *cobra.Command {
	var root string
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Inspect the checkpoint store directly (works while the daemon is down)",
	}
	cmd.PersistentFlags().StringVar(&root, "root-dir", "/var/lib/bootlet", "the daemon's --root-dir")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List checkpointed objects and damaged records",
		RunE: func(*cobra.Command, []string) error {
			recs, damaged, err := checkpoint.Inspect(root)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 8, 3, ' ', 0)
			fmt.Fprintln(w, "KIND\tNAMESPACE\tNAME\tREVISION\tBYTES")
			for _, r := range recs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\n", r.Kind, r.Namespace, r.Name, r.Revision, len(r.Data))
			}
			w.Flush()
			for _, d := range damaged {
				fmt.Printf("DAMAGED %s: %s\n", d.Path, d.Reason)
			}
			return nil
		},
	}
	show := &cobra.Command{
		Use:   "show (pod|secret|configmap|podcheckpoints) [NAMESPACE/]NAME",
		Short: "Print one checkpointed object as YAML",
		Args:  cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			kind := checkpoint.Kind(cli.NormalizeResource(args[0]))
			ns, name := "default", args[1]
			if i := strings.Index(name, "/"); i >= 0 {
				ns, name = name[:i], name[i+1:]
			}
			r, err := checkpoint.InspectOne(root, kind, ns, name)
			if err != nil {
				return err
			}
			return printYAML(r.Data)
		},
	}
	export := &cobra.Command{
		Use:   "export",
		Short: "Print every checkpointed object as multi-document YAML (feed it to `bootlet apply -f -`)",
		RunE: func(*cobra.Command, []string) error {
			recs, err := checkpoint.InspectObjects(root)
			if err != nil {
				return err
			}
			for _, r := range recs {
				fmt.Println("---")
				if err := printYAML(r.Data); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.AddCommand(ls, show, export)
	return cmd
}

// printYAML prints a record's object JSON as YAML, the form apply -f reads.
func printYAML(data []byte) error {
	var obj map[string]interface{}
	if err := json.Unmarshal(data, &obj); err != nil {
		return err
	}
	b, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(b)
	return err
}
