package etcd

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/etcdsnapshot"
	"github.com/bootlet/bootlet/manifests"
)

// etcdSaveFlags are `etcd snapshot save`'s flags; an empty one is taken
// from the rendered etcd pod.
type etcdSaveFlags struct {
	assetDir, endpoints, cacert, cert, key string
	dialTimeout                            time.Duration
}

// etcdRestoreFlags are `etcd snapshot restore`'s flags; an empty identity
// flag is taken from the rendered etcd pod.
type etcdRestoreFlags struct {
	assetDir, dataDir, name, initialCluster, peerURLs string
}

type loadMember func(assetDir string) (manifests.EtcdMember, error)

// saveClient is the client for `save`: the flags, and for each one left
// empty the rendered member's value. The asset dir is read only when a
// value is missing, so a member render did not make can be saved too.
func saveClient(f etcdSaveFlags, load loadMember) (etcdsnapshot.Client, error) {
	c := etcdsnapshot.Client{Endpoint: f.endpoints, CAFile: f.cacert, CertFile: f.cert, KeyFile: f.key, DialTimeout: f.dialTimeout}
	if eps := strings.Split(f.endpoints, ","); len(eps) > 1 {
		return c, fmt.Errorf("--endpoints %s: a snapshot is one member's state; give one endpoint", f.endpoints)
	}
	if c.Endpoint == "" || c.CAFile == "" || c.CertFile == "" || c.KeyFile == "" {
		m, err := load(f.assetDir)
		if err != nil {
			return c, fmt.Errorf("%w; or give --endpoints, --cacert, --cert and --key", err)
		}
		c.Endpoint = cmp.Or(c.Endpoint, m.ClientURL)
		c.CAFile, c.CertFile, c.KeyFile = cmp.Or(c.CAFile, m.CAFile), cmp.Or(c.CertFile, m.CertFile), cmp.Or(c.KeyFile, m.KeyFile)
	}
	return c, c.Validate()
}

// restoreMember is the identity for `restore`, likewise; it returns the
// rendered member's data dir too ("" when nothing was read), for the hint.
func restoreMember(f etcdRestoreFlags, load loadMember) (etcdsnapshot.Member, string, error) {
	m := etcdsnapshot.Member{Name: f.name, InitialCluster: f.initialCluster}
	if f.peerURLs != "" {
		m.PeerURLs = strings.Split(f.peerURLs, ",")
	}
	var dataDir string
	if m.Name == "" || m.InitialCluster == "" || len(m.PeerURLs) == 0 {
		r, err := load(f.assetDir)
		if err != nil {
			return m, "", fmt.Errorf("%w; or give --name, --initial-cluster and --initial-advertise-peer-urls", err)
		}
		m.Name, m.InitialCluster = cmp.Or(m.Name, r.Name), cmp.Or(m.InitialCluster, r.InitialCluster)
		if len(m.PeerURLs) == 0 {
			m.PeerURLs = r.PeerURLs
		}
		dataDir = r.DataDir
	}
	if err := m.Validate(); err != nil {
		return m, "", fmt.Errorf("etcd member: %w", err)
	}
	return m, dataDir, nil
}

// printSnapshotStatus prints what `etcdutl snapshot status -w table` does.
func printSnapshotStatus(w io.Writer, st snapshot.Status) {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "HASH\tREVISION\tTOTAL KEYS\tTOTAL SIZE\tVERSION")
	fmt.Fprintf(tw, "%x\t%d\t%d\t%s\t%s\n", st.Hash, st.Revision, st.TotalKey, humanize.Bytes(uint64(st.TotalSize)), st.Version)
	tw.Flush()
}

// NewCommand is `bootlet etcd snapshot save|restore`: backups of the
// node's etcd member, which render's pod describes (docs/operations.md).
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "etcd", Short: cli.EtcdShort}
	snap := &cobra.Command{Use: "snapshot", Short: "Save a snapshot of the node's etcd member, or restore one into a new data directory"}
	cmd.AddCommand(snap)

	var sf etcdSaveFlags
	save := &cobra.Command{
		Use:   "save FILE",
		Short: "Save a consistent snapshot of the node's etcd member to FILE (written to a new FILE.part-RANDOM, verified, then renamed)",
		Long: `Save a consistent snapshot of the node's etcd member to FILE, through etcd's client API over TLS.
The endpoint and the TLS files default to the rendered etcd pod's loopback client URL, the etcd
CA and the etcd healthcheck client pair under --asset-dir. The data is written to a new file
beside FILE, FILE.part-RANDOM, created exclusively (mode 0600, owned by the caller: a snapshot
holds every Secret of the cluster; an existing FILE.part, or a symlink, is never written through
or used) and fsynced; only when etcd's sha256 trailer matches and etcdutl's status reads the
whole database is it renamed to FILE, which replaces whatever FILE was (a symlink included,
never followed).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cli.NodeDefaults(cmd, &sf.assetDir, nil)
			named := func(err error) error {
				return cli.NameFlag(err, cli.DirFlag{Dir: sf.assetDir, Flag: "--asset-dir"}, cli.DirFlag{Dir: sf.cacert, Flag: "--cacert"},
					cli.DirFlag{Dir: sf.cert, Flag: "--cert"}, cli.DirFlag{Dir: sf.key, Flag: "--key"})
			}
			c, err := saveClient(sf, manifests.LoadEtcdMember)
			if err != nil {
				return named(err)
			}
			res, err := etcdsnapshot.Save(cmd.Context(), c, args[0])
			if err != nil {
				return named(err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "saved %s from %s (etcd %s)\n", res.Path, res.Endpoint, res.ServerVersion)
			printSnapshotStatus(out, res.Status)
			return nil
		},
	}
	save.Flags().StringVar(&sf.assetDir, "asset-dir", cli.DefaultAssetDir, "the --asset-dir of bootlet render, where the defaults come from")
	save.Flags().StringVar(&sf.endpoints, "endpoints", "", "the member's client URL (default: the rendered etcd pod's first --listen-client-urls)")
	save.Flags().StringVar(&sf.cacert, "cacert", "", "CA of the member's serving certificate (default: ASSET-DIR/pki/etcd/ca.crt)")
	save.Flags().StringVar(&sf.cert, "cert", "", "client certificate (default: ASSET-DIR/pki/etcd/healthcheck-client.crt)")
	save.Flags().StringVar(&sf.key, "key", "", "client key (default: ASSET-DIR/pki/etcd/healthcheck-client.key)")
	save.Flags().DurationVar(&sf.dialTimeout, "dial-timeout", etcdsnapshot.DefaultDialTimeout, "how long to wait for the member to answer before the snapshot starts")

	var rf etcdRestoreFlags
	restore := &cobra.Command{
		Use:   "restore FILE --data-dir DIR",
		Short: "Restore a snapshot into a new etcd data directory, as the rendered etcd member",
		Long: `Restore the snapshot FILE into a new data directory --data-dir (it must not exist, or be empty),
with etcdutl's restore. The member keeps the rendered etcd pod's identity (--name,
--initial-cluster, --initial-advertise-peer-urls under --asset-dir; each flag overrides), so the
rendered etcd pod starts on it. It never touches the running member's data directory: stop
etcd and swap the directories yourself (docs/operations.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if rf.dataDir == "" {
				return fmt.Errorf("--data-dir is required: the new directory to restore into")
			}
			m, memberDir, err := restoreMember(rf, manifests.LoadEtcdMember)
			if err != nil {
				return err
			}
			st, err := etcdsnapshot.Restore(args[0], rf.dataDir, m)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "restored %s into %s as member %s (peer URLs %s)\n", args[0], rf.dataDir, m.Name, strings.Join(m.PeerURLs, ","))
			printSnapshotStatus(out, st)
			if memberDir != "" {
				fmt.Fprintf(out, "the rendered etcd pod keeps its data in %s: with etcd stopped, move that aside and this in its place\n", memberDir)
			}
			return nil
		},
	}
	restore.Flags().StringVar(&rf.assetDir, "asset-dir", cli.DefaultAssetDir, "the --asset-dir of bootlet render, where the member's identity comes from")
	restore.Flags().StringVar(&rf.dataDir, "data-dir", "", "the new data directory (must not exist, or be empty)")
	restore.Flags().StringVar(&rf.name, "name", "", "member name (default: the rendered etcd pod's --name)")
	restore.Flags().StringVar(&rf.initialCluster, "initial-cluster", "", "initial cluster (default: the rendered etcd pod's --initial-cluster)")
	restore.Flags().StringVar(&rf.peerURLs, "initial-advertise-peer-urls", "", "peer URLs, comma-separated (default: the rendered etcd pod's)")

	snap.AddCommand(save, restore)
	return cmd
}
