package kubeletgate

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/handoff"
)

// NewCommand is the kubelet's side of the handoff's start gate
// (handoff/startgate.go, docs/design/handoff.md "The kubelet start gate"): the
// kubelet's unit runs it before the kubelet (ExecStartPre) and, with
// --stopped, after it (ExecStopPost). It never keeps the kubelet from
// starting: past --timeout it says so and exits 0.
func NewCommand() *cobra.Command {
	var dir string
	var timeout time.Duration
	var stopped bool
	cmd := &cobra.Command{
		Use:   "kubelet-gate",
		Short: "Before the kubelet starts: announce it to bootlet and wait until bootlet starts no container (the kubelet's ExecStartPre)",
		Long: `Announces the kubelet's start to bootlet's handoff and waits, at most --timeout, until
none of bootlet's pod syncs is creating or starting anything. From then on bootlet leaves every pod
whose static copy is in place to the kubelet, so the kubelet's first look at the runtime sees each
container bootlet started running, and adopts it instead of starting a duplicate.

With --stopped (the kubelet's ExecStopPost) it withdraws the announcement. Without bootlet on the
node (--dir does not exist) there is nothing to wait for. It exits 0 in every case but a bad flag: the kubelet
starts anyway.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return fmt.Errorf("--dir must name bootlet's run directory")
			}
			if stopped {
				if err := handoff.KubeletStopped(dir); err != nil {
					fmt.Fprintln(os.Stderr, "bootlet kubelet-gate:", err)
				}
				return nil
			}
			waited, err := handoff.OpenForKubelet(cmd.Context(), dir, timeout)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bootlet kubelet-gate: %v (waited %s)\n", err, waited.Round(time.Millisecond))
				return nil
			}
			fmt.Printf("bootlet kubelet-gate: bootlet starts nothing the kubelet will (waited %s)\n", waited.Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", handoff.DefaultGateDir, "bootlet's run directory: the directory of its API socket (--socket)")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "the longest wait for bootlet's container starts")
	cmd.Flags().BoolVar(&stopped, "stopped", false, "the kubelet stopped: withdraw the announcement")
	return cmd
}
