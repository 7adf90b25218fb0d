package noderecover

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 27, 1, 2, 3, 0, time.UTC)
	base := func() Facts {
		return Facts{AssetDir: "/a", DataDir: "/var/lib/etcd", DataDirState: DirMissing, RootDir: "/var/lib/bootlet", RootState: DirMissing,
			StaticPodPath: "/etc/kubernetes/manifests", Snapshot: "/b/snap.db", Now: now}
	}
	const sfx = ".pre-recover-20261127T010203Z"
	cases := []struct {
		name   string
		mod    func(*Facts)
		want   []string // actions, as Kind Path->To
		refuse []string // substrings, one per reason
	}{
		{"snapshot into a lost data dir: restore only", func(*Facts) {}, []string{"restore /var/lib/etcd"}, nil},
		{"snapshot into an empty data dir (a mount point left empty)", func(f *Facts) { f.DataDirState = DirEmpty }, []string{"restore /var/lib/etcd"}, nil},
		{"snapshot, non-empty data dir: refused without --replace-data-dir", func(f *Facts) { f.DataDirState, f.DataDirHasMember = DirNonEmpty, true },
			nil, []string{"etcd data dir /var/lib/etcd is not empty: give --replace-data-dir to move it aside (to /var/lib/etcd" + sfx + ")"}},
		{"snapshot, non-empty data dir, --replace-data-dir: moved aside, then restored", func(f *Facts) { f.DataDirState, f.ReplaceDataDir = DirNonEmpty, true },
			[]string{"move-aside /var/lib/etcd->/var/lib/etcd" + sfx, "restore /var/lib/etcd"}, nil},
		{"no snapshot: the data dir's member is used", func(f *Facts) { f.Snapshot, f.DataDirState, f.DataDirHasMember = "", DirNonEmpty, true },
			[]string{"use /var/lib/etcd"}, nil},
		{"no snapshot, no member in the data dir", func(f *Facts) { f.Snapshot, f.DataDirState = "", DirNonEmpty },
			nil, []string{"holds no etcd member (/var/lib/etcd/member/snap/db): give the snapshot"}},
		{"no snapshot, no data dir", func(f *Facts) { f.Snapshot = "" }, nil, []string{"holds no etcd member"}},
		{"--replace-data-dir without a snapshot", func(f *Facts) { f.Snapshot, f.ReplaceDataDir, f.DataDirHasMember = "", true, true },
			nil, []string{"--replace-data-dir without --snapshot"}},
		{"unreadable snapshot", func(f *Facts) { f.SnapshotErr = errors.New("no such file or directory") }, nil, []string{"snapshot /b/snap.db: no such file or directory"}},
		{"bootlet's old root and static copies moved aside first", func(f *Facts) {
			f.RootState = DirNonEmpty
			f.StaticCopies = []string{"/etc/kubernetes/manifests/bootlet_kube-system_etcd.yaml", "/etc/kubernetes/manifests/bootlet_kube-system_kube-apiserver-checkpoint.yaml"}
		}, []string{
			"move-aside /etc/kubernetes/manifests/bootlet_kube-system_etcd.yaml->/etc/kubernetes/manifests" + sfx + "/bootlet_kube-system_etcd.yaml",
			"move-aside /etc/kubernetes/manifests/bootlet_kube-system_kube-apiserver-checkpoint.yaml->/etc/kubernetes/manifests" + sfx + "/bootlet_kube-system_kube-apiserver-checkpoint.yaml",
			"move-aside /var/lib/bootlet->/var/lib/bootlet" + sfx,
			"restore /var/lib/etcd"}, nil},
		{"an empty root is left", func(f *Facts) { f.RootState = DirEmpty }, []string{"restore /var/lib/etcd"}, nil},
		{"the lock is held: refused, first, with the holder", func(f *Facts) {
			f.LockHeld = "a bootlet daemon runs on this root dir (lock /var/lib/bootlet.lock held by pid 7)"
			f.Answering = []string{"etcd at https://127.0.0.1:2379"}
		}, nil, []string{"lock /var/lib/bootlet.lock held by pid 7", "etcd at https://127.0.0.1:2379 still answers"}},
		{"services still answer: refused, each named", func(f *Facts) {
			f.Answering = []string{"bootlet at unix:///run/bootlet/bootlet.sock", "etcd at https://127.0.0.1:2379"}
		},
			nil, []string{"bootlet at unix:///run/bootlet/bootlet.sock still answers", "etcd at https://127.0.0.1:2379 still answers"}},
		{"missing bootstrap pod and CA key: each named with its remedy", func(f *Facts) {
			f.MissingAssets = []string{"/a/bootstrap-manifests/kube-apiserver.yaml", "/a/pki/etcd/ca.key"}
		}, nil, []string{"/a/bootstrap-manifests/kube-apiserver.yaml is missing: run `bootlet render --asset-dir /a` with the node's original flags", "/a/pki/etcd/ca.key is missing: the node's PKI cannot be re-made"}},
		{"no etcd pod: no data dir, refused once, for the pod", func(f *Facts) {
			f.MissingAssets, f.DataDir, f.DataDirState = []string{"/a/bootstrap-manifests/etcd.yaml"}, "", DirMissing
		}, nil, []string{"/a/bootstrap-manifests/etcd.yaml is missing"}},
		{"everything wrong at once: all of it named, nothing done", func(f *Facts) {
			f.Answering = []string{"the kubelet at http://127.0.0.1:10248/healthz"}
			f.MissingAssets = []string{"/a/self-hosted/*.yaml"}
			f.DataDirState = DirNonEmpty
			f.RootState = DirNonEmpty
		}, nil, []string{"the kubelet", "/a/self-hosted/*.yaml is missing: run `bootlet render", "is not empty"}},
	}
	for _, tc := range cases {
		f := base()
		tc.mod(&f)
		plan, err := Decide(f)
		if tc.refuse != nil {
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Errorf("%s: want a refusal, got %v, plan %v", tc.name, err, plan)
				continue
			}
			if len(re.Reasons) != len(tc.refuse) {
				t.Errorf("%s: reasons %q, want %d", tc.name, re.Reasons, len(tc.refuse))
				continue
			}
			for i, want := range tc.refuse {
				if !strings.Contains(re.Reasons[i], want) {
					t.Errorf("%s: reason %d %q, want it to contain %q", tc.name, i, re.Reasons[i], want)
				}
			}
			if plan != nil {
				t.Errorf("%s: a refusal must plan nothing, got %v", tc.name, plan)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var got []string
		for _, a := range plan {
			s := string(a.Kind) + " " + a.Path
			if a.To != "" {
				s += "->" + a.To
			}
			if a.Why == "" {
				t.Errorf("%s: action %s says not why", tc.name, s)
			}
			got = append(got, s)
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: plan\n%s\nwant\n%s", tc.name, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

func TestRefusedErrorText(t *testing.T) {
	if got := (&RefusedError{Reasons: []string{"a"}}).Error(); got != "recover refused: a" {
		t.Errorf("one reason: %q", got)
	}
	if got := (&RefusedError{Reasons: []string{"a", "b"}}).Error(); got != "recover refused:\n  - a\n  - b" {
		t.Errorf("two reasons: %q", got)
	}
}
