package delete

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootlet/bootlet/cmd/internal/cli"
)

func NewCommand(server *string) *cobra.Command {
	var namespace string
	var grace int64
	var wait bool
	cmd := &cobra.Command{
		Use:   "delete (pod|secret|configmap) NAME...",
		Short: "Delete objects; pods are stopped gracefully",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, err := cli.NamespacedClient(server, &namespace)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			opts := metav1.DeleteOptions{}
			if grace >= 0 {
				opts.GracePeriodSeconds = &grace
			}
			res := cli.NormalizeResource(args[0])
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
