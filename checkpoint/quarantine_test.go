package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQuarantineRecord: a record the caller cannot use is moved to the
// quarantine directory unchanged, stops being served (also after a reopen),
// is reported by Quarantined, and its revision still bounds the counter.
func TestQuarantineRecord(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(KindPod, "default", "good", []byte(`{"kind":"Pod"}`)); err != nil {
		t.Fatal(err)
	}
	bad, err := s.Put(KindPod, "default", "bad", []byte(`{"spec":"not a pod spec"}`))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "checkpoint", "pods", "default", "bad.json")
	content, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Quarantine(KindPod, "default", "bad", "does not decode as a Pod"); err != nil {
		t.Fatal(err)
	}
	if err := s.Quarantine(KindPod, "default", "missing", "x"); err != nil {
		t.Fatalf("quarantining a missing record: %v", err)
	}
	if _, ok := s.Get(KindPod, "default", "bad"); ok {
		t.Error("quarantined record still served")
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("record file still in the store: %v", err)
	}
	q := s.Quarantined()
	if len(q) != 1 || !strings.Contains(q[0].Reason, "does not decode as a Pod") || filepath.Dir(q[0].Path) != filepath.Join(root, "quarantine") {
		t.Fatalf("Quarantined() = %+v", q)
	}
	if got, err := os.ReadFile(q[0].Path); err != nil || string(got) != string(content) {
		t.Errorf("quarantined content changed: %v", err)
	}
	s2, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s2.Get(KindPod, "default", "bad"); ok {
		t.Error("quarantined record served after reopen")
	}
	if _, ok := s2.Get(KindPod, "default", "good"); !ok {
		t.Error("good record lost")
	}
	if s2.Revision() < bad.Revision {
		t.Errorf("Revision() = %d after reopen, want >= %d (the quarantined record's)", s2.Revision(), bad.Revision)
	}
}

// TestOpenOnFullDisk: a store whose revision counter file is behind its
// records opens, and serves every record, when the disk refuses writes;
// the counter never goes backwards, and a later Delete persists it.
func TestOpenOnFullDisk(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		if _, err := s.Put(KindConfigMap, "default", n, []byte(`{"n":"`+n+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	// Only Open and Delete write the counter file: it is behind now.
	for _, op := range []string{"create", "write", "sync", "rename"} {
		s2, err := openFS(root, &faultFS{fail: op})
		if err != nil {
			t.Fatalf("Open with %s failing: %v", op, err)
		}
		if got := len(s2.List(KindConfigMap)); got != 3 || s2.Revision() != 3 {
			t.Fatalf("Open with %s failing: %d records, revision %d", op, got, s2.Revision())
		}
		if _, err := s2.Put(KindConfigMap, "default", "d", []byte(`{}`)); err == nil {
			t.Fatalf("Put succeeded with %s failing", op)
		}
	}
	s3, err := openFS(root, &faultFS{fail: "create"})
	if err != nil {
		t.Fatal(err)
	}
	if s3.persistedRev >= 3 {
		t.Fatalf("counter file persisted despite the failure (%d)", s3.persistedRev)
	}
	s3.fs = osFS{}
	if err := s3.Delete(KindConfigMap, "default", "c"); err != nil {
		t.Fatal(err)
	}
	s4, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if s4.Revision() != 3 {
		t.Errorf("Revision() = %d after deleting the newest record, want 3", s4.Revision())
	}
}

// TestQuarantineNameFailure: picking a quarantine file name never spins.
// An Lstat error other than ENOENT is returned at once (it used to loop
// forever), and a directory where every candidate name exists ends in an
// error after a bounded number of tries. Either way the record stays in the
// store, served, and nothing is moved.
func TestQuarantineNameFailure(t *testing.T) {
	for _, tc := range []struct {
		fail      string
		want      string
		maxLstats int
	}{
		{fail: "lstat", want: "permission denied", maxLstats: 1},
		{fail: "lstat-exists", want: "no free name", maxLstats: maxQuarantineTries},
	} {
		t.Run(tc.fail, func(t *testing.T) {
			root := t.TempDir()
			ffs := &faultFS{}
			s, err := openFS(root, ffs)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Put(KindPod, "default", "bad", []byte(`{"spec":1}`)); err != nil {
				t.Fatal(err)
			}
			ffs.fail, ffs.lstats = tc.fail, 0
			done := make(chan error, 1)
			go func() { done <- s.Quarantine(KindPod, "default", "bad", "does not decode") }()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Quarantine did not return: it spins on the Lstat result")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Quarantine error = %v, want one containing %q", err, tc.want)
			}
			if ffs.lstats < 1 || ffs.lstats > tc.maxLstats {
				t.Errorf("%d Lstat calls, want 1..%d", ffs.lstats, tc.maxLstats)
			}
			if _, ok := s.Get(KindPod, "default", "bad"); !ok {
				t.Error("record no longer served after a failed quarantine")
			}
			if len(s.Quarantined()) != 0 {
				t.Errorf("Quarantined() = %+v after a failed quarantine", s.Quarantined())
			}
			if q, _ := os.ReadDir(filepath.Join(root, "quarantine")); len(q) != 0 {
				t.Errorf("quarantine directory holds %d files", len(q))
			}
		})
	}
}

// TestOpenQuarantineLstatFailure: Open returns the Lstat error when it must
// quarantine a damaged file and cannot pick a name, instead of spinning.
func TestOpenQuarantineLstatFailure(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(KindPod, "default", "torn", []byte(`{"kind":"Pod"}`)); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "checkpoint", "pods", "default", "torn.json")
	if err := os.WriteFile(file, []byte(`{"formatVersion": 1, "revi`), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := openFS(root, &faultFS{fail: "lstat"}); done <- err }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Open did not return: it spins on the Lstat result")
	}
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Open error = %v, want the Lstat error", err)
	}
}
