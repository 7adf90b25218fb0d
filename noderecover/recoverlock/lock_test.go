package recoverlock

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParseHolder(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Holder
	}{
		{"123 recover\n", Holder{123, Recover}},
		{"77 daemon\n", Holder{77, Daemon}},
		{"", Holder{}},
		{"123", Holder{}},
		{"-1 recover\n", Holder{}},
		{"x daemon\n", Holder{}},
		{"123 kubelet\n", Holder{}},
		{"1 daemon\n2 daemon\n", Holder{}},
	} {
		if got := parseHolder(tc.in); got != tc.want {
			t.Errorf("parseHolder(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestHeldErrorText(t *testing.T) {
	const p = "/var/lib/bootlet.lock"
	for _, tc := range []struct {
		e    HeldError
		want string
	}{
		{HeldError{p, Daemon, Holder{42, Recover}}, "a bootlet recover is under way (lock /var/lib/bootlet.lock held by pid 42)"},
		{HeldError{p, Daemon, Holder{}}, "a bootlet recover is under way (lock /var/lib/bootlet.lock held by a process that has not written its pid yet)"},
		{HeldError{p, Recover, Holder{7, Daemon}}, "a bootlet daemon runs on this root dir (lock /var/lib/bootlet.lock held by pid 7): stop it first"},
		{HeldError{p, Recover, Holder{8, Recover}}, "another bootlet recover is under way (lock /var/lib/bootlet.lock held by pid 8)"},
		{HeldError{p, Recover, Holder{}}, "lock /var/lib/bootlet.lock is held by a process that has not written its pid yet (a bootlet daemon, or another recover)"},
	} {
		if got := tc.e.Error(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%+v: %q, want it to start with %q", tc.e, got, tc.want)
		}
	}
}

func TestPath(t *testing.T) {
	if p, err := Path("/var/lib/bootlet/"); err != nil || p != "/var/lib/bootlet.lock" {
		t.Errorf("Path = %q, %v", p, err)
	}
	for _, bad := range []string{"", "/"} {
		if _, err := Path(bad); err == nil {
			t.Errorf("Path(%q) succeeded", bad)
		}
	}
}

// TestAcquire: flock locks belong to an open file, so two Acquires in one
// process conflict as two processes' would.
func TestAcquire(t *testing.T) {
	root := filepath.Join(t.TempDir(), "node", "bootlet")
	held := func(err error, want Role, holder Role) {
		t.Helper()
		var he *HeldError
		if !errors.As(err, &he) || he.Want != want || he.Holder != (Holder{os.Getpid(), holder}) || he.Path != root+".lock" {
			t.Fatalf("want the lock held by %s (pid %d), got %v (%+v)", holder, os.Getpid(), err, he)
		}
	}

	d1, err := Acquire(root, Daemon)
	if err != nil {
		t.Fatal(err)
	}
	if d1.Path() != root+".lock" {
		t.Errorf("path %s", d1.Path())
	}
	if fi, err := os.Stat(d1.Path()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("lock file: %v %v", fi, err)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the root dir itself was created: %v", err)
	}
	d2, err := Acquire(root, Daemon)
	if err != nil {
		t.Fatalf("a second daemon: %v", err)
	}
	_, err = Acquire(root, Recover)
	held(err, Recover, Daemon)
	d1.Release()
	_, err = Acquire(root, Recover)
	held(err, Recover, Daemon)
	d2.Release()

	r, err := Acquire(root, Recover)
	if err != nil {
		t.Fatalf("recover once the daemons have gone: %v", err)
	}
	if data, _ := os.ReadFile(r.Path()); string(data) != strconv.Itoa(os.Getpid())+" recover\n" {
		t.Errorf("lock file holds %q", data)
	}
	_, err = Acquire(root, Daemon)
	held(err, Daemon, Recover)
	if !strings.Contains(err.Error(), "a bootlet recover is under way (lock "+root+".lock held by pid "+strconv.Itoa(os.Getpid())+")") {
		t.Errorf("daemon's error: %v", err)
	}
	_, err = Acquire(root, Recover)
	held(err, Recover, Recover)
	r.Release()
	d3, err := Acquire(root, Daemon)
	if err != nil {
		t.Fatalf("daemon after recover: %v", err)
	}
	d3.Release()
}

// TestAcquireRefusesASymlink: the lock file is never opened through a
// link, whose target would be created or truncated.
func TestAcquireRefusesASymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "bootlet")
	if err := os.Symlink(target, root+".lock"); err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(root, Recover); err == nil || !strings.Contains(err.Error(), root+".lock") {
		t.Errorf("Acquire through a symlink: %v", err)
	}
	if data, _ := os.ReadFile(target); string(data) != "keep" {
		t.Errorf("the symlink's target was written: %q", data)
	}
	if _, err := Acquire(root, "kubelet"); err == nil {
		t.Error("an unknown role was accepted")
	}
}
