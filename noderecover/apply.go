package noderecover

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/bootlet/bootlet/etcdsnapshot"
	"github.com/bootlet/bootlet/manifests"
)

// RequiredAssets are the files of render's asset dir recover needs, as
// paths relative to it: the bootstrap pods bootlet will run, the
// kubeconfigs of the pivot and the kubelet, and the node's PKI that no
// Secret holds (the etcd CA's key, etcd's serving and peer pairs) or that
// nothing can re-make without changing the cluster's identity (the CAs,
// the service-account keys). self-hosted/ must hold at least one file
// (SelfHostedAsset).
var RequiredAssets = []string{
	filepath.Join(manifests.BootstrapManifestsDir, "etcd.yaml"),
	filepath.Join(manifests.BootstrapManifestsDir, "kube-apiserver.yaml"),
	filepath.Join(manifests.BootstrapManifestsDir, "kube-controller-manager.yaml"),
	filepath.Join(manifests.BootstrapManifestsDir, "kube-scheduler.yaml"),
	"admin.conf", "kubelet.conf",
	"pki/ca.crt", "pki/ca.key", "pki/sa.key", "pki/sa.pub", "pki/front-proxy-ca.crt", "pki/front-proxy-ca.key",
	"pki/etcd/ca.crt", "pki/etcd/ca.key", "pki/etcd/server.crt", "pki/etcd/server.key", "pki/etcd/peer.crt", "pki/etcd/peer.key",
}

// SelfHostedAsset is render's self-hosted/ directory, as RequiredAssets
// names it when it holds no object file.
var SelfHostedAsset = manifests.SelfHostedDir + "/*.yaml"

// Options are recover's inputs (its flags).
type Options struct {
	AssetDir       string
	Snapshot       string
	ReplaceDataDir bool
	RootDir        string
	StaticPodPath  string
	// DaemonSocket is bootlet's API socket, KubeletHealthzURL the
	// kubelet's healthz ("" skips the check): recover refuses while either
	// answers, or the etcd member's client URL does.
	DaemonSocket      string
	KubeletHealthzURL string
}

// Observe gathers the Facts for o, and the rendered etcd member (zero when
// its pod is missing: Decide then refuses).
func Observe(o Options, now time.Time) (Facts, manifests.EtcdMember, error) {
	f, m, err := observeDisk(o, now)
	if err == nil {
		f.Answering = answering(o, m)
	}
	return f, m, err
}

// observeDisk is Observe without asking what answers.
func observeDisk(o Options, now time.Time) (Facts, manifests.EtcdMember, error) {
	f := Facts{AssetDir: o.AssetDir, Snapshot: o.Snapshot, ReplaceDataDir: o.ReplaceDataDir, RootDir: o.RootDir, StaticPodPath: o.StaticPodPath, Now: now}
	for _, rel := range RequiredAssets {
		p := filepath.Join(o.AssetDir, rel)
		if _, err := os.Stat(p); err != nil {
			f.MissingAssets = append(f.MissingAssets, p)
		}
	}
	if files, _ := filepath.Glob(filepath.Join(o.AssetDir, manifests.SelfHostedDir, "*.yaml")); len(files) == 0 {
		f.MissingAssets = append(f.MissingAssets, filepath.Join(o.AssetDir, SelfHostedAsset))
	}
	var m manifests.EtcdMember
	if _, err := os.Stat(manifests.EtcdManifestPath(o.AssetDir)); err == nil {
		var err error
		if m, err = manifests.LoadEtcdMember(o.AssetDir); err != nil {
			return f, m, err
		}
		f.DataDir = m.DataDir
	}
	if o.Snapshot != "" {
		if fi, err := os.Stat(o.Snapshot); err != nil {
			f.SnapshotErr = err
		} else if !fi.Mode().IsRegular() {
			f.SnapshotErr = errors.New("not a regular file")
		}
	}
	var err error
	if f.DataDir != "" {
		if f.DataDirState, err = dirState(f.DataDir); err != nil {
			return f, m, err
		}
		_, err := os.Stat(filepath.Join(f.DataDir, "member", "snap", "db"))
		f.DataDirHasMember = err == nil
	}
	if f.RootState, err = dirState(o.RootDir); err != nil {
		return f, m, err
	}
	if o.StaticPodPath != "" {
		// The prefix of handoff.StaticPodFileName: bootlet's files only.
		if f.StaticCopies, err = filepath.Glob(filepath.Join(o.StaticPodPath, "bootlet_*.yaml")); err != nil {
			return f, m, err
		}
	}
	return f, m, nil
}

// dirState reads what dir holds.
func dirState(dir string) (DirState, error) {
	d, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return DirMissing, nil
	}
	if err != nil {
		return DirMissing, err
	}
	defer d.Close()
	if _, err := d.Readdirnames(1); errors.Is(err, io.EOF) {
		return DirEmpty, nil
	} else if err != nil {
		return DirMissing, fmt.Errorf("%s: %w", dir, err)
	}
	return DirNonEmpty, nil
}

// answerTimeout bounds each "does it still answer" check.
const answerTimeout = time.Second

// answering lists the node's services that still answer: bootlet's
// socket, the etcd member's client port, the kubelet's healthz.
func answering(o Options, m manifests.EtcdMember) []string {
	var out []string
	if o.DaemonSocket != "" {
		if c, err := net.DialTimeout("unix", o.DaemonSocket, answerTimeout); err == nil {
			c.Close()
			out = append(out, "bootlet at unix://"+o.DaemonSocket)
		}
	}
	if u, err := url.Parse(m.ClientURL); err == nil && u.Host != "" {
		if c, err := net.DialTimeout("tcp", u.Host, answerTimeout); err == nil {
			c.Close()
			out = append(out, "etcd at "+m.ClientURL)
		}
	}
	if o.KubeletHealthzURL != "" {
		cl := &http.Client{Timeout: answerTimeout}
		if resp, err := cl.Get(o.KubeletHealthzURL); err == nil {
			resp.Body.Close()
			out = append(out, "the kubelet at "+o.KubeletHealthzURL)
		}
	}
	return out
}

// Apply carries plan out in order, printing each action to out before it
// and stopping at the first failure (what is done stays done, and is
// printed). Restores go through etcdsnapshot.Restore as member m.
func Apply(plan Plan, snapshotPath string, m manifests.EtcdMember, out io.Writer) error {
	for _, a := range plan {
		fmt.Fprintln(out, a.String())
		switch a.Kind {
		case MoveAside:
			if err := os.MkdirAll(filepath.Dir(a.To), 0o700); err != nil {
				return err
			}
			if err := os.Rename(a.Path, a.To); err != nil {
				if errors.Is(err, syscall.EBUSY) {
					return fmt.Errorf("moving %s aside: %w (a mount point cannot be renamed: move its content aside yourself, then run recover again)", a.Path, err)
				}
				return fmt.Errorf("moving %s aside: %w", a.Path, err)
			}
		case Restore:
			member := etcdsnapshot.Member{Name: m.Name, PeerURLs: m.PeerURLs, InitialCluster: m.InitialCluster}
			st, err := etcdsnapshot.Restore(snapshotPath, a.Path, member)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "  restored revision %d, %d keys, as member %s (peer URLs %s)\n", st.Revision, st.TotalKey, m.Name, strings.Join(m.PeerURLs, ","))
		case UseDataDir:
		}
	}
	return nil
}
