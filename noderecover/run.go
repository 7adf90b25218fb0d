package noderecover

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/bootlet/bootlet/etcdsnapshot"
	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/noderecover/recoverlock"
)

// Run is `bootlet recover`: it takes the node's lock, observes, decides,
// verifies the snapshot, looks again at what answers, and only then
// applies the plan. Every check comes before the first move, so a refusal
// or a damaged snapshot leaves the node as it was. It returns the rendered
// etcd member (for the caller's next steps).
//
// The lock (recoverlock, exclusive, held to the end) is what keeps a daemon
// out: one running holds it shared, one starting cannot take it. The
// kubelet and etcd take no lock; they are probed after the lock is taken
// and again right before the first move, since the snapshot's check can
// take a while.
func Run(o Options, now time.Time, out io.Writer) (manifests.EtcdMember, error) {
	return run(o, now, out, answering)
}

// run is Run with what answers asked of probe (the tests' stand-in).
func run(o Options, now time.Time, out io.Writer, probe func(Options, manifests.EtcdMember) []string) (manifests.EtcdMember, error) {
	lk, lockErr := recoverlock.Acquire(o.RootDir, recoverlock.Recover)
	var held *recoverlock.HeldError
	if lockErr != nil && !errors.As(lockErr, &held) {
		return manifests.EtcdMember{}, lockErr
	}
	if lk != nil {
		defer lk.Release()
	}
	f, m, err := observeDisk(o, now)
	if err != nil {
		return m, err
	}
	f.Answering = probe(o, m)
	if held != nil {
		f.LockHeld = held.Error()
	}
	plan, err := Decide(f)
	if err != nil {
		return m, err
	}
	if plan.Restores() {
		st, err := etcdsnapshot.Verify(o.Snapshot, scratchParent(f.DataDir))
		if err != nil {
			f.SnapshotErr = err
			return m, decideAgain(f)
		}
		fmt.Fprintf(out, "verified snapshot %s: revision %d, %d keys (etcd's sha256 and database checks)\n", o.Snapshot, st.Revision, st.TotalKey)
	}
	f.Answering = probe(o, m)
	if err := decideAgain(f); err != nil {
		return m, err
	}
	return m, Apply(plan, o.Snapshot, m, out)
}

// decideAgain is Decide on facts that changed after its first yes: only
// its refusal matters, the plan is the one decided before.
func decideAgain(f Facts) error {
	_, err := Decide(f)
	return err
}

// Restores says whether p restores a snapshot.
func (p Plan) Restores() bool {
	for _, a := range p {
		if a.Kind == Restore {
			return true
		}
	}
	return false
}

// scratchParent is where Verify's scratch restore goes: beside the data
// dir, where the restore needs the same room right after, when that
// directory exists; else the system's temp dir. It is never created.
func scratchParent(dataDir string) string {
	if dataDir == "" {
		return ""
	}
	parent := filepath.Dir(dataDir)
	if fi, err := os.Stat(parent); err == nil && fi.IsDir() {
		return parent
	}
	return ""
}
