package etcdsnapshot

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// otherUID owns the planted files: nobody, not the tests' root.
const otherUID = 65534

// plantNobodys writes path as another user's file, mode 0644.
func plantNobodys(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, otherUID, otherUID); err != nil {
		t.Fatalf("chown %s (the test must run as root): %v", path, err)
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("planting another user's file needs root")
	}
}

// assertUntouched: path is still the planted file, content and owner.
func assertUntouched(t *testing.T, path, content string, uid int) {
	t.Helper()
	data, err := os.ReadFile(path)
	fi, serr := os.Lstat(path)
	if err != nil || serr != nil || string(data) != content || fi.Sys().(*syscall.Stat_t).Uid != uint32(uid) {
		t.Errorf("%s was touched: %q, %v, %v", path, data, err, serr)
	}
}

// assertOwnSnapshot: path is a regular file of this process's user, mode
// 0600, and a whole snapshot.
func assertOwnSnapshot(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || st.Uid != uint32(os.Geteuid()) || st.Nlink != 1 {
		t.Errorf("%s: mode %v, uid %d, %d links: want a regular file of uid %d, mode 0600, one link", path, fi.Mode(), st.Uid, st.Nlink, os.Geteuid())
	}
	if err := VerifyChecksum(path); err != nil {
		t.Error(err)
	}
}

// TestCreatePart: the file a snapshot is written to is always a new one,
// whatever FILE.part or FILE.part-* names hold.
func TestCreatePart(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	plantNobodys(t, path+".part", "planted")
	victim := filepath.Join(dir, "victim")
	plantNobodys(t, victim, "victim")
	for _, l := range []string{path + ".part-1", path + ".part-2"} {
		if err := os.Symlink(victim, l); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		f, err := createPart(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(f.Name(), path+".part-") {
			t.Errorf("temporary file %s", f.Name())
		}
		if _, err := f.WriteString("mine"); err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		if fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) || fi.Sys().(*syscall.Stat_t).Nlink != 1 {
			t.Errorf("%s: %v", f.Name(), fi.Mode())
		}
		f.Close()
		os.Remove(f.Name())
	}
	assertUntouched(t, path+".part", "planted", otherUID)
	assertUntouched(t, victim, "victim", otherUID)
	if _, err := createPart(filepath.Join(dir, "nope", "s.db")); err == nil || !strings.Contains(err.Error(), "snapshot "+filepath.Join(dir, "nope", "s.db")) {
		t.Errorf("in a missing directory: %v", err)
	}
}

// TestSaveNeverWritesThroughAPlantedFile saves from a real etcd into a
// directory where another user planted FILE.part (their own file, mode
// 0644), and for a second file FILE.part as a symlink to a file of theirs
// and FILE itself as a symlink: no planted file is written, opened for
// writing, renamed or removed; each snapshot is a new regular file of
// root's, mode 0600.
func TestSaveNeverWritesThroughAPlantedFile(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	endpoint := startEtcd(t, "n1", filepath.Join(dir, "etcd"), nil)
	if _, err := newClient(t, endpoint, nil).Put(context.Background(), "/registry/secrets/a", "secret"); err != nil {
		t.Fatal(err)
	}
	snaps := t.TempDir()
	c := Client{Endpoint: endpoint}

	planted := filepath.Join(snaps, "a.db")
	plantNobodys(t, planted+".part", "planted by another user")
	if _, err := Save(context.Background(), c, planted); err != nil {
		t.Fatal(err)
	}
	assertUntouched(t, planted+".part", "planted by another user", otherUID)
	assertOwnSnapshot(t, planted)

	linked := filepath.Join(snaps, "b.db")
	victim, victimFile := filepath.Join(snaps, "victim"), filepath.Join(snaps, "victim-file")
	plantNobodys(t, victim, "theirs")
	plantNobodys(t, victimFile, "theirs too")
	if err := os.Symlink(victim, linked+".part"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victimFile, linked); err != nil {
		t.Fatal(err)
	}
	if _, err := Save(context.Background(), c, linked); err != nil {
		t.Fatal(err)
	}
	assertUntouched(t, victim, "theirs", otherUID)
	assertUntouched(t, victimFile, "theirs too", otherUID)
	if target, err := os.Readlink(linked + ".part"); err != nil || target != victim {
		t.Errorf("%s.part: %q, %v", linked, target, err)
	}
	assertOwnSnapshot(t, linked)

	ents, err := os.ReadDir(snaps)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "a.db a.db.part b.db b.db.part victim victim-file" {
		t.Errorf("left in %s: %s", snaps, got)
	}
}

// TestVerify: etcd's restore check passes a whole snapshot and refuses a
// damaged or cut one, naming the file and the cause; its scratch restore
// is gone either way.
func TestVerify(t *testing.T) {
	dir := t.TempDir()
	endpoint := startEtcd(t, "n1", filepath.Join(dir, "etcd"), nil)
	cli := newClient(t, endpoint, nil)
	for _, k := range []string{"a", "b", "c"} {
		if _, err := cli.Put(context.Background(), "/registry/configmaps/"+k, strings.Repeat(k, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	snap := filepath.Join(dir, "s.db")
	res, err := Save(context.Background(), Client{Endpoint: endpoint}, snap)
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	st, err := Verify(snap, scratch)
	if err != nil || st != res.Status {
		t.Errorf("Verify(good) = %+v, %v; want %+v", st, err, res.Status)
	}

	good, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	// A byte of a value, in the database's middle: bbolt's structure
	// holds, etcd's sha256 does not.
	flipped := append([]byte(nil), good...)
	i := strings.Index(string(flipped), strings.Repeat("b", 1000))
	if i < 0 {
		t.Fatal("the value is not in the snapshot")
	}
	flipped[i+500] ^= 0xff
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"flipped", flipped, "expected sha256"},
		{"cut", good[:len(good)-1000], "is not an intact etcd snapshot"},
		{"junk", []byte("not a snapshot"), "is not an intact etcd snapshot"},
	} {
		p := filepath.Join(dir, tc.name+".db")
		if err := os.WriteFile(p, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Verify(p, scratch)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Verify = %v, want it to name %s and %q", tc.name, err, p, tc.want)
		}
	}
	if _, err := Verify(filepath.Join(dir, "none.db"), scratch); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing: %v", err)
	}
	if _, err := Verify(dir, scratch); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	if left, _ := os.ReadDir(scratch); len(left) > 0 {
		t.Errorf("Verify left %v in %s", left, scratch)
	}
}
