package recover

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/handoff"
	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/noderecover"
	"github.com/bootlet/bootlet/podapi"
)

// daemonSocket is the path of a unix:// --server ("" for another scheme:
// nothing to check).
func daemonSocket(server string) string {
	s := podapi.ServerFromEnv(server)
	if p, ok := strings.CutPrefix(s, "unix://"); ok {
		return p
	}
	return ""
}

// NewCommand is `bootlet recover`: the node's control plane back from
// its etcd data or a snapshot, offline (package noderecover,
// docs/operations.md "Recovery").
func NewCommand(server *string) *cobra.Command {
	// The daemon's socket is the global --server.
	o := &noderecover.Options{}
	cmd := &cobra.Command{
		Use:   cli.RecoverUse,
		Short: cli.RecoverShort,
		Long: `Recover a control-plane node whose etcd data, or a snapshot of it (bootlet etcd snapshot save),
and render's asset dir (pki/ and the kubeconfigs; bootstrap-manifests/ and self-hosted/ written
again by bootlet render with the node's original flags, which keeps pki/) survived, and nothing
else: not the running pods, bootlet's checkpoints and pivot record, nor the kubelet's static pods.

Run it with bootlet, the kubelet and etcd stopped; it refuses while any of them answers. For its
whole run it holds the node's lock, ROOT.lock beside --root-dir: it refuses while a daemon holds
it (a running daemon does), and a daemon does not start while recover holds it. It checks
everything before it changes anything, --snapshot with etcd's own integrity check (its sha256 and
its database): a damaged snapshot is refused, and nothing is moved. It
restores --snapshot into the rendered etcd pod's data dir, as that member (a non-empty data dir
only with --replace-data-dir, which moves it aside), or without --snapshot checks that the data
dir holds a member; moves bootlet's --root-dir and bootlet's static copies in
--kubelet-static-pod-path aside (NAME.pre-recover-TIME: nothing is deleted). Then start
containerd, bootlet and the kubelet as at any boot: bootlet runs the bootstrap pods from
--manifests-dir on the recovered data, and the pivot hands them to the self-hosted DaemonSet and
Deployments etcd holds, as they were when the snapshot was taken.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.DaemonSocket = daemonSocket(*server)
			return runRecover(cmd, *o, time.Now())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Snapshot, "snapshot", "", "the snapshot to restore (bootlet etcd snapshot save); empty: etcd starts on the data its data dir holds")
	f.StringVar(&o.AssetDir, "asset-dir", cli.DefaultAssetDir, "the --asset-dir of bootlet render: the bootstrap pods, the etcd member's identity and data dir, pki/")
	f.BoolVar(&o.ReplaceDataDir, "replace-data-dir", false, "with --snapshot: move a non-empty etcd data dir aside (DIR.pre-recover-TIME) instead of refusing")
	f.StringVar(&o.RootDir, "root-dir", "/var/lib/bootlet", "bootlet's --root-dir: moved aside when it holds anything (its checkpoints and pivot record are of the cluster before)")
	f.StringVar(&o.StaticPodPath, "kubelet-static-pod-path", handoff.DefaultKubeletStaticPodPath, "the kubelet's staticPodPath: bootlet's static copies there (bootlet_*.yaml) are moved aside")
	f.StringVar(&o.KubeletHealthzURL, "kubelet-healthz-url", handoff.DefaultKubeletHealthzURL, "the kubelet's healthz: recover refuses while it answers (empty: not checked)")
	return cmd
}

func runRecover(cmd *cobra.Command, o noderecover.Options, now time.Time) error {
	if o.AssetDir == "" || o.RootDir == "" {
		return fmt.Errorf("--asset-dir and --root-dir are required")
	}
	for _, p := range []*string{&o.AssetDir, &o.RootDir, &o.StaticPodPath, &o.Snapshot} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	out := cmd.OutOrStdout()
	member, err := noderecover.Run(o, now, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "recovered: etcd member %s on %s\n", member.Name, member.DataDir)
	fmt.Fprintf(out, "next: start containerd, then bootlet (--manifests-dir %s, --self-hosted-assets %s, --pivot-kubeconfig %s), then the kubelet;\n",
		filepath.Join(o.AssetDir, manifests.BootstrapManifestsDir), filepath.Join(o.AssetDir, manifests.SelfHostedDir), filepath.Join(o.AssetDir, "admin.conf"))
	fmt.Fprintln(out, "the pivot hands the bootstrap pods back to the self-hosted objects etcd holds (bootlet status: phase self-hosted)")
	return nil
}
