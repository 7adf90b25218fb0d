package etcdsnapshot

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// Member is the identity a restored data directory is given: the flags
// the member that will run on it is started with. A restored directory
// holds a new one-member cluster whose member ID is derived from these, so
// they must be the running pod's, or etcd refuses to start on it.
type Member struct {
	Name           string
	PeerURLs       []string
	InitialCluster string
}

// InitialClusterToken is etcd's default --initial-cluster-token, which
// render's etcd pod (kubeadm's) does not set.
const InitialClusterToken = "etcd-cluster"

// Validate checks m as etcd's bootstrap would, with errors that say which
// value is wrong.
func (m Member) Validate() error {
	if m.Name == "" {
		return errors.New("the member name is empty")
	}
	peers, err := types.NewURLs(m.PeerURLs)
	if err != nil {
		return fmt.Errorf("peer URLs %v: %w", m.PeerURLs, err)
	}
	cluster, err := types.NewURLsMap(m.InitialCluster)
	if err != nil {
		return fmt.Errorf("initial cluster %q: %w", m.InitialCluster, err)
	}
	own, ok := cluster[m.Name]
	if !ok {
		return fmt.Errorf("initial cluster %q has no member %q", m.InitialCluster, m.Name)
	}
	if !slices.Equal(own.StringSlice(), peers.StringSlice()) {
		return fmt.Errorf("initial cluster %q gives member %q the peer URLs %v, but its peer URLs are %v", m.InitialCluster, m.Name, own.StringSlice(), peers.StringSlice())
	}
	return nil
}

// restoreConfig is etcdutl's configuration for restoring snapshotPath into
// outDir as m.
func restoreConfig(snapshotPath, outDir string, m Member) (snapshot.RestoreConfig, error) {
	if err := m.Validate(); err != nil {
		return snapshot.RestoreConfig{}, err
	}
	return snapshot.RestoreConfig{
		SnapshotPath:        snapshotPath,
		Name:                m.Name,
		OutputDataDir:       outDir,
		PeerURLs:            m.PeerURLs,
		InitialCluster:      m.InitialCluster,
		InitialClusterToken: InitialClusterToken,
	}, nil
}

// Restore writes a new etcd data directory dataDir from the snapshot file at
// snapshotPath, for member m, and returns the snapshot's status. dataDir must
// not exist or be empty: restore never overwrites data. It is built in a
// hidden sibling directory and renamed into place, so dataDir never holds a
// half-restored member.
func Restore(snapshotPath, dataDir string, m Member) (snapshot.Status, error) {
	if err := m.Validate(); err != nil {
		return snapshot.Status{}, fmt.Errorf("etcd member: %w", err)
	}
	if snapshotPath == "" {
		return snapshot.Status{}, errors.New("a snapshot file is required")
	}
	if fi, err := os.Stat(snapshotPath); err != nil {
		return snapshot.Status{}, fmt.Errorf("snapshot: %w", err)
	} else if !fi.Mode().IsRegular() {
		return snapshot.Status{}, fmt.Errorf("snapshot %s is not a regular file", snapshotPath)
	}
	if dataDir == "" {
		return snapshot.Status{}, errors.New("a data directory to restore into is required")
	}
	dataDir, err := filepath.Abs(dataDir)
	if err != nil {
		return snapshot.Status{}, err
	}
	if err := CheckNewDataDir(dataDir); err != nil {
		return snapshot.Status{}, err
	}
	st, err := Status(snapshotPath)
	if err != nil {
		return snapshot.Status{}, err
	}

	// An existing dataDir is empty (CheckNewDataDir) and may be a mount
	// point, which rename(2) cannot replace (EBUSY): restore inside it and
	// move the result's entries (member/) up. A missing one is made whole
	// beside it and renamed into place, so a half-restored dir never shows.
	_, statErr := os.Stat(dataDir)
	exists := statErr == nil
	parent := filepath.Dir(dataDir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return snapshot.Status{}, err
	}
	tmpParent := parent
	if exists {
		tmpParent = dataDir
	}
	tmp, err := os.MkdirTemp(tmpParent, "."+filepath.Base(dataDir)+".restore-")
	if err != nil {
		return snapshot.Status{}, err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed or emptied
	cfg, err := restoreConfig(snapshotPath, tmp, m)
	if err != nil {
		return snapshot.Status{}, err
	}
	if err := snapshot.NewV3(zap.NewNop()).Restore(cfg); err != nil {
		return snapshot.Status{}, fmt.Errorf("restoring %s: %w", snapshotPath, err)
	}
	if !exists {
		if err := os.Rename(tmp, dataDir); err != nil {
			return snapshot.Status{}, err
		}
		return st, syncDir(parent)
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return snapshot.Status{}, err
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(tmp, e.Name()), filepath.Join(dataDir, e.Name())); err != nil {
			return snapshot.Status{}, err
		}
	}
	if err := os.Remove(tmp); err != nil {
		return snapshot.Status{}, err
	}
	return st, syncDir(dataDir)
}

// CheckNewDataDir refuses a data directory that holds anything: restore
// only ever creates a member, so a non-empty directory is most likely the
// running member's data, or another restore's.
func CheckNewDataDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("data dir %s exists and is not a directory", dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := d.Readdirnames(1); err == nil {
		return fmt.Errorf("data dir %s exists and is not empty: restore only creates a new data directory; name one that does not exist, or move that one aside first", dir)
	} else if err != io.EOF {
		return err
	}
	return nil
}

// verifyMember is the identity of Verify's scratch restore, which nothing
// ever runs: etcdutl's restore wants one, and the checks do not depend on it.
var verifyMember = Member{Name: "verify", PeerURLs: []string{"http://127.0.0.1:2380"}, InitialCluster: "verify=http://127.0.0.1:2380"}

// Verify checks the snapshot at path with etcd's own checks, before anyone
// acts on it: etcdutl's restore, which compares the sha256 etcd appends to
// a snapshot it sends with the database and opens the database as etcd
// would, then etcdutl's status, which checks every bbolt page and reads
// every key. etcdutl exports the sha256 check only as part of its restore,
// so Verify restores into a scratch directory under scratchParent ("": the
// system's temp dir) and removes it; it changes nothing else, and the
// scratch needs as much room as a restore.
func Verify(path, scratchParent string) (st snapshot.Status, err error) {
	if fi, err := os.Stat(path); err != nil {
		return snapshot.Status{}, err
	} else if !fi.Mode().IsRegular() {
		return snapshot.Status{}, fmt.Errorf("%s is not a regular file", path)
	}
	tmp, err := os.MkdirTemp(scratchParent, ".etcd-snapshot-verify-")
	if err != nil {
		return snapshot.Status{}, fmt.Errorf("scratch directory to verify %s in: %w", path, err)
	}
	defer os.RemoveAll(tmp)
	cfg, err := restoreConfig(path, filepath.Join(tmp, "data"), verifyMember)
	if err != nil {
		return snapshot.Status{}, err
	}
	if err := restoreChecked(cfg); err != nil {
		return snapshot.Status{}, fmt.Errorf("%s is not an intact etcd snapshot (etcd's restore check): %w", path, err)
	}
	return Status(path)
}

// restoreChecked is etcdutl's restore, with a panic made an error: etcd's
// backend panics (through its logger, even a no-op one) on a database it
// cannot open, which only a damaged snapshot whose sha256 still matches
// gets to.
func restoreChecked(cfg snapshot.RestoreConfig) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("etcd could not open the database: %v", r)
		}
	}()
	return snapshot.NewV3(zap.NewNop()).Restore(cfg)
}
