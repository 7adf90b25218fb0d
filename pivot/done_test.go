package pivot

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestPivotedBootstrapPod(t *testing.T) {
	done := &DoneRecord{Components: []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}}
	partial := &DoneRecord{Components: []string{"kube-scheduler"}}
	for _, tc := range []struct {
		name     string
		r        *DoneRecord
		ns, pod  string
		withdraw bool
	}{
		{"no record: nothing handed over", nil, "kube-system", "kube-apiserver", false},
		{"the apiserver's bootstrap pod", done, "kube-system", "kube-apiserver", true},
		{"the scheduler's bootstrap pod", done, "kube-system", "kube-scheduler", true},
		{"etcd stays pinned", done, "kube-system", "etcd", false},
		{"same name, other namespace", done, "default", "kube-apiserver", false},
		{"a component the record does not list", partial, "kube-system", "kube-apiserver", false},
		{"a component the record lists", partial, "kube-system", "kube-scheduler", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Pivoted(tc.r, DefaultComponents, tc.ns, tc.pod); got != tc.withdraw {
				t.Errorf("Pivoted(%s/%s) = %v, want %v", tc.ns, tc.pod, got, tc.withdraw)
			}
		})
	}
}

func TestPivotDoneRecord(t *testing.T) {
	path := RecordPath(t.TempDir())
	if r, err := ReadDone(path); r != nil || err != nil {
		t.Fatalf("no record yet: got %v, %v", r, err)
	}
	at := time.Date(2026, 11, 23, 16, 0, 0, 0, time.UTC)
	if err := WriteDone(path, DoneRecord{CompletedAt: at, Components: []string{"kube-apiserver"}}); err != nil {
		t.Fatal(err)
	}
	r, err := ReadDone(path)
	if err != nil || r == nil || !r.CompletedAt.Equal(at) || len(r.Components) != 1 || r.Components[0] != "kube-apiserver" {
		t.Fatalf("read back %+v, %v", r, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := os.WriteFile(path, []byte("{half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r, err := ReadDone(path); err == nil {
		t.Errorf("a damaged record read as %+v, want an error", r)
	}
}

// TestRunPivotRecordedDone: a bootlet restarted after a completed pivot
// returns at once, without waiting for the apiserver (which it would need
// to create the self-hosted objects again); without the record it waits.
func TestRunPivotRecordedDone(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{NodeName: "node-1", APIServer: &rest.Config{Host: "https://127.0.0.1:1"},
		SelfHostedDir: dir, DoneFile: RecordPath(dir)}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() == nil {
		t.Fatalf("with no record Run returned after %s, before its context ended: it must wait for the apiserver", time.Since(start))
	}

	if err := WriteDone(cfg.DoneFile, DoneRecord{CompletedAt: time.Now(), Components: []string{"kube-apiserver"}}); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := Run(ctx2, cfg); err != nil {
		t.Fatal(err)
	}
	if ctx2.Err() != nil {
		t.Fatal("with the record Run waited for the apiserver")
	}
}
