package noderecover

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// DirState is what a directory holds.
type DirState int

const (
	// DirMissing: no such directory.
	DirMissing DirState = iota
	// DirEmpty: it exists and holds nothing.
	DirEmpty
	// DirNonEmpty: it holds something.
	DirNonEmpty
)

func (s DirState) String() string {
	switch s {
	case DirMissing:
		return "missing"
	case DirEmpty:
		return "empty"
	}
	return "not empty"
}

// Facts are what Decide decides on; Observe gathers them.
type Facts struct {
	// AssetDir is render's --asset-dir.
	AssetDir string
	// MissingAssets are the required files of AssetDir that are missing
	// (RequiredAssets), as paths.
	MissingAssets []string
	// Snapshot is the snapshot to restore; "" to start from DataDir as
	// it is. SnapshotErr: it cannot be read, or fails etcd's integrity
	// check (Run verifies it once everything else allows the plan).
	Snapshot    string
	SnapshotErr error
	// DataDir is the etcd member's data directory (the rendered etcd
	// pod's hostPath); DataDirState what it holds, DataDirHasMember whether
	// that is an etcd member (member/snap/db).
	DataDir          string
	DataDirState     DirState
	DataDirHasMember bool
	// ReplaceDataDir: the operator allows a non-empty DataDir to be moved
	// aside for the snapshot (--replace-data-dir).
	ReplaceDataDir bool
	// RootDir is bootlet's --root-dir, RootState what it holds.
	RootDir   string
	RootState DirState
	// StaticPodPath is the kubelet's staticPodPath; StaticCopies the
	// static copies bootlet wrote there (bootlet_*.yaml), as paths.
	StaticPodPath string
	StaticCopies  []string
	// LockHeld is why recover could not take the node's lock
	// (recoverlock: a daemon runs, or another recover); "" when it holds
	// it.
	LockHeld string
	// Answering lists the node's services that still answer, each with
	// where ("etcd at 127.0.0.1:2379").
	Answering []string
	// Now names the moved-aside paths.
	Now time.Time
}

// ActionKind is what an Action does.
type ActionKind string

const (
	// MoveAside renames Path to To.
	MoveAside ActionKind = "move-aside"
	// Restore restores Facts.Snapshot into Path (etcdsnapshot.Restore,
	// with the rendered member's identity).
	Restore ActionKind = "restore"
	// UseDataDir keeps the etcd data in Path as it is.
	UseDataDir ActionKind = "use"
)

// Action is one step of a Plan.
type Action struct {
	Kind     ActionKind
	Path, To string
	Why      string
}

func (a Action) String() string {
	switch a.Kind {
	case MoveAside:
		return fmt.Sprintf("move %s aside to %s: %s", a.Path, a.To, a.Why)
	case Restore:
		return fmt.Sprintf("restore into %s: %s", a.Path, a.Why)
	}
	return fmt.Sprintf("use %s: %s", a.Path, a.Why)
}

// Plan is Decide's answer: the actions, in the order Apply carries them
// out.
type Plan []Action

// RefusedError is Decide's refusal: every reason, each naming its path.
type RefusedError struct{ Reasons []string }

func (e *RefusedError) Error() string {
	if len(e.Reasons) == 1 {
		return "recover refused: " + e.Reasons[0]
	}
	return "recover refused:\n  - " + strings.Join(e.Reasons, "\n  - ")
}

// asideSuffix is what a moved-aside path gets: unique per run, sortable,
// and saying why it is there.
func asideSuffix(now time.Time) string {
	return ".pre-recover-" + now.UTC().Format("20060102T150405Z")
}

// Aside is where Decide moves path.
func Aside(path string, now time.Time) string { return path + asideSuffix(now) }

// Decide is recover's rule book, pure: what must be true before anything
// is changed, and what is changed. Every refusal is collected, so one run
// names everything to fix. The rules and why: docs/operations.md,
// "Recovery".
func Decide(f Facts) (Plan, error) {
	var why []string
	if f.LockHeld != "" {
		why = append(why, f.LockHeld)
	}
	for _, a := range f.Answering {
		why = append(why, fmt.Sprintf("%s still answers: stop the node's services first (bootlet, the kubelet, and so etcd); recover runs offline", a))
	}
	for _, m := range f.MissingAssets {
		why = append(why, fmt.Sprintf("%s is missing%s", m, assetHint(f.AssetDir, m)))
	}
	if f.DataDir == "" && len(f.MissingAssets) == 0 {
		why = append(why, "the rendered etcd pod names no data directory")
	}
	var plan Plan
	switch {
	case f.Snapshot != "":
		if f.SnapshotErr != nil {
			why = append(why, fmt.Sprintf("snapshot %s: %v", f.Snapshot, f.SnapshotErr))
		}
		if f.DataDirState == DirNonEmpty {
			if !f.ReplaceDataDir {
				why = append(why, fmt.Sprintf("etcd data dir %s is not empty: give --replace-data-dir to move it aside (to %s) and restore the snapshot in its place, or drop --snapshot to recover from that data", f.DataDir, Aside(f.DataDir, f.Now)))
			} else {
				plan = append(plan, Action{Kind: MoveAside, Path: f.DataDir, To: Aside(f.DataDir, f.Now), Why: "--replace-data-dir: the snapshot replaces this data"})
			}
		}
		if f.DataDir != "" {
			plan = append(plan, Action{Kind: Restore, Path: f.DataDir, Why: fmt.Sprintf("snapshot %s, as the rendered etcd member", f.Snapshot)})
		}
	case f.ReplaceDataDir:
		why = append(why, "--replace-data-dir without --snapshot: nothing would replace the data")
	case f.DataDir != "" && !f.DataDirHasMember:
		why = append(why, fmt.Sprintf("no --snapshot, and etcd data dir %s holds no etcd member (%s): give the snapshot to restore", f.DataDir, filepath.Join(f.DataDir, "member", "snap", "db")))
	case f.DataDir != "":
		plan = append(plan, Action{Kind: UseDataDir, Path: f.DataDir, Why: "no --snapshot: etcd starts on the data it holds"})
	}
	if len(why) > 0 {
		return nil, &RefusedError{Reasons: why}
	}
	// Before the data: nothing that would run the old cluster's pods may be
	// left when the node's services start again.
	var first Plan
	if len(f.StaticCopies) > 0 {
		dst := Aside(f.StaticPodPath, f.Now)
		for _, p := range f.StaticCopies {
			first = append(first, Action{Kind: MoveAside, Path: p, To: filepath.Join(dst, filepath.Base(p)),
				Why: "bootlet's static copy of a pod from before: the kubelet would run it beside the recovered pods"})
		}
	}
	if f.RootState == DirNonEmpty {
		first = append(first, Action{Kind: MoveAside, Path: f.RootDir, To: Aside(f.RootDir, f.Now),
			Why: "bootlet's checkpoints and pivot record are of the cluster before: the record would keep the bootstrap pods out, the checkpoints would run old pods"})
	}
	return append(first, plan...), nil
}

// assetHint says how a missing asset comes back.
func assetHint(assetDir, path string) string {
	rel, err := filepath.Rel(assetDir, path)
	if err != nil {
		return ""
	}
	top := strings.SplitN(rel, string(filepath.Separator), 2)[0]
	switch top {
	case "bootstrap-manifests", "self-hosted", "admin.conf", "kubelet.conf":
		return fmt.Sprintf(": run `bootlet render --asset-dir %s` with the node's original flags first (it keeps pki/'s keys and certificates)", assetDir)
	case "pki":
		return ": the node's PKI cannot be re-made (a new CA would not match the cluster's Secrets, kubeconfigs and etcd's peers); restore pki/ from a backup"
	}
	return ""
}
