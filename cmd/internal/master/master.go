package master

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/internal/etcdapi"
	"github.com/bootlet/bootlet/internal/kubeclient"
	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/masters"
	masterscontroller "github.com/bootlet/bootlet/masters/controller"
	"github.com/bootlet/bootlet/podapi"
	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade/nodeagent"
)

// NewCommand is `bootlet master` and its verbs.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{Use: cli.MasterUse, Short: cli.MasterShort}
	cmd.AddCommand(newStatusCommand(), newRemoveCommand())
	return cmd
}

func newStatusCommand() *cobra.Command {
	var f cli.ClusterFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the masters, etcd's members (voter or learner, leader, answering or not) and each master's apiserver",
		Long: `Reads the Nodes and the control plane's pods through the API, and etcd's member list
and each member's status through this master's own member: on a master render made, the
rendered etcd pod in --asset-dir names its client URL and the healthcheck client's
certificates; on a node labelled a master since, the member's pod its bootlet daemon runs
names them (the member's own certificate is the client's), and --kubeconfig names the API.
Masters come first, then the workers, then any member that no Node has, such as a dead
master's. It changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := observe(cmd, &f)
			defer o.close()
			if err != nil {
				return err
			}
			return printStatus(cmd.OutOrStdout(), masters.StatusRows(o.nodes, o.members, o.leader), o.etcdErr)
		},
	}
	f.Add(cmd)
	return cmd
}

func newRemoveCommand() *cobra.Command {
	var f cli.ClusterFlags
	var force bool
	cmd := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a master that is gone for good from etcd's members, once the quorum allows",
		Long: `Removes etcd's member NAME, a master that is gone for good, so that the next master
can join without a stale member in its way. It refuses, and exits non-zero:
  - a live master (labelled and Ready, its member answering or not): remove its label to demote it;
  - a member that still answers, unless --force: its machine may come back;
  - etcd's last voter;
  - any removal while etcd has no quorum, or that would leave fewer answering voters than a quorum
    of those left: etcd itself refuses both (its strict reconfiguration check), forced or not.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := observe(cmd, &f)
			defer o.close()
			if err != nil {
				return err
			}
			act, refusals := masters.DecideRemoval(o.facts(), masters.Removal{Name: args[0], Force: force})
			if len(refusals) > 0 {
				var why []string
				for _, r := range refusals {
					why = append(why, r.Reason)
				}
				return fmt.Errorf("master %s: %s", args[0], strings.Join(why, "; "))
			}
			if err := o.etcd.Remove(cmd.Context(), o.endpoint, act.MemberID); err != nil {
				return fmt.Errorf("removing member %x (%s): %w", act.MemberID, args[0], err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "removed etcd member %x (%s)\n", act.MemberID, args[0])
			return err
		},
	}
	f.Add(cmd)
	cmd.Flags().BoolVar(&force, "force", false, "remove a member that still answers: only for a machine that will never come back")
	return cmd
}

// observed is what a verb read.
type observed struct {
	nodes   []masters.Node
	members []masters.Member
	leader  uint64
	etcdErr error
	// etcd answered at endpoint, this master's own member.
	etcd     *etcdapi.Client
	endpoint string
}

func (o observed) facts() masters.Facts {
	return masters.Facts{Nodes: o.nodes, Members: o.members, EtcdErr: o.etcdErr, Now: time.Now()}
}

func observe(cmd *cobra.Command, f *cli.ClusterFlags) (observed, error) {
	var o observed
	path, err := f.KubeconfigPath(cmd)
	if err != nil {
		return o, err
	}
	_, cs, err := kubeclient.ForFile(path, "bootlet-master", 30*time.Second)
	if err != nil {
		return o, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if o.nodes, err = readNodes(cmd.Context(), cs); err != nil {
		return o, err
	}
	access, err := memberAccess(cmd.Context(), f.AssetDir)
	if err != nil {
		return o, err
	}
	// The daemon's own calls and rule (etcdapi): each member's status at
	// its own address, within 3 s, with a leader and no alarm to count as
	// answering.
	if o.etcd, err = etcdapi.New(access.CAFile, access.CertFile, access.KeyFile); err != nil {
		o.etcdErr = err
		return o, nil
	}
	o.endpoint = access.Endpoint
	members, leader, err := o.etcd.Observe(cmd.Context(), []string{access.Endpoint})
	o.members, o.leader, o.etcdErr = masterscontroller.MembersOf(members), leader, err
	return o, nil
}

// memberAccess is how this node's etcd member is reached as a client: on
// a master render made, its rendered pod in assetDir and the healthcheck
// client's pair; on a node labelled a master since, which has no asset
// dir, the member's pod its bootlet daemon runs and the member's own pair
// (a client certificate too).
func memberAccess(ctx context.Context, assetDir string) (etcdapi.Access, error) {
	m, err := manifests.LoadEtcdMember(assetDir)
	if err == nil {
		return etcdapi.Access{Endpoint: m.ClientURL, CAFile: m.CAFile, CertFile: m.CertFile, KeyFile: m.KeyFile}, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return etcdapi.Access{}, fmt.Errorf("%w; bootlet master runs on a master", err)
	}
	pod, derr := daemonMemberPod(ctx)
	if derr != nil {
		return etcdapi.Access{}, fmt.Errorf("%w; nor does this node's bootlet run an etcd member (%v): bootlet master runs on a master", err, derr)
	}
	mp, err := nodeagent.ReadMemberPod(pod)
	if err != nil {
		return etcdapi.Access{}, err
	}
	if mp.ServingCertFile == "" || mp.ServingKeyFile == "" {
		return etcdapi.Access{}, fmt.Errorf("etcd pod %s mounts no --cert-file and --key-file from the host", pod.Name)
	}
	return etcdapi.Access{Endpoint: mp.ClientURL, CAFile: mp.CAFile, CertFile: mp.ServingCertFile, KeyFile: mp.ServingKeyFile}, nil
}

// daemonMemberPod is the etcd member's pod in the bootlet daemon's store
// ($BOOTLET_SERVER, else its default socket): not an upgrade's helper,
// not being deleted.
func daemonMemberPod(ctx context.Context) (*v1.Pod, error) {
	cs, err := podapi.NewClient(podapi.ServerFromEnv(""))
	if err != nil {
		return nil, err
	}
	pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !btypes.IsEtcdUpgradeHelper(p) && p.DeletionTimestamp == nil && nodeagent.EtcdContainer(p) != nil {
			return p, nil
		}
	}
	return nil, errors.New("no etcd pod in kube-system")
}

func readNodes(ctx context.Context, cs kubernetes.Interface) ([]masters.Node, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the Nodes: %w", err)
	}
	pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing kube-system's pods: %w", err)
	}
	return masters.NodesOf(nodes.Items, pods.Items), nil
}

func (o observed) close() {
	if o.etcd != nil {
		o.etcd.Close()
	}
}

func printStatus(w io.Writer, rows []masters.Row, etcdErr error) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tROLE\tSTATUS\tETCD MEMBER\tETCD\tAPISERVER")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Node, r.Role, r.Ready, r.Member, r.Etcd, r.APIServer)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if etcdErr != nil {
		return fmt.Errorf("etcd: %w", etcdErr)
	}
	return nil
}
