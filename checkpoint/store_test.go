package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func mustOpen(t testing.TB, root string) *Store {
	t.Helper()
	s, err := Open(root)
	if err != nil {
		t.Fatalf("Open(%s): %v", root, err)
	}
	return s
}

func mustPut(t testing.TB, s *Store, k Kind, ns, name, data string) Record {
	t.Helper()
	r, err := s.Put(k, ns, name, []byte(data))
	if err != nil {
		t.Fatalf("Put(%s, %s, %s): %v", k, ns, name, err)
	}
	return r
}

func obj(name, v string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","metadata":{"name":%q},"v":%q}`, name, v)
}

func recPath(s *Store, k Kind, ns, name string) string {
	return filepath.Join(s.Dir(), string(k), ns, name+".json")
}

// snapshot returns every record of every kind, for comparing stores.
func snapshot(s *Store) []Record {
	var out []Record
	for _, k := range kinds {
		out = append(out, s.List(k)...)
	}
	return out
}

func equalRecords(a, b []Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Kind != b[i].Kind || a[i].Namespace != b[i].Namespace || a[i].Name != b[i].Name ||
			a[i].Revision != b[i].Revision || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

// tempFiles lists leftover temp files anywhere under dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && isTemp(d.Name()) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	root := t.TempDir()
	s := mustOpen(t, root)
	if got, want := s.Dir(), filepath.Join(root, "checkpoint"); got != want {
		t.Fatalf("Dir() = %s, want %s", got, want)
	}
	if s.Revision() != 0 {
		t.Fatalf("fresh store Revision() = %d", s.Revision())
	}

	puts := []struct {
		kind     Kind
		ns, name string
	}{
		{KindPod, "default", "web"},
		{KindPod, "kube-system", "dns"},
		{KindPod, "default", "api"},
		{KindSecret, "default", "tls"},
		{KindConfigMap, "default", "cfg"},
		{KindConfigMap, "a", "cfg"},
	}
	for i, p := range puts {
		r := mustPut(t, s, p.kind, p.ns, p.name, obj(p.name, "1"))
		if r.Revision != uint64(i+1) {
			t.Errorf("Put #%d revision = %d, want %d", i, r.Revision, i+1)
		}
		if string(r.Data) != obj(p.name, "1") {
			t.Errorf("Put returned Data %s", r.Data)
		}
	}
	// Overwrite.
	r := mustPut(t, s, KindPod, "default", "web", obj("web", "2"))
	if r.Revision != 7 {
		t.Fatalf("overwrite revision = %d, want 7", r.Revision)
	}
	got, ok := s.Get(KindPod, "default", "web")
	if !ok || string(got.Data) != obj("web", "2") || got.Revision != 7 || got.Kind != KindPod || got.Namespace != "default" || got.Name != "web" {
		t.Fatalf("Get after overwrite = %+v, %v", got, ok)
	}
	if _, ok := s.Get(KindSecret, "default", "web"); ok {
		t.Fatal("Get found a record under the wrong kind")
	}

	var names []string
	for _, r := range s.List(KindPod) {
		names = append(names, r.Namespace+"/"+r.Name)
	}
	if want := "default/api,default/web,kube-system/dns"; strings.Join(names, ",") != want {
		t.Fatalf("List(pods) = %v, want %s", names, want)
	}
	if l := s.List(KindConfigMap); len(l) != 2 || l[0].Namespace != "a" {
		t.Fatalf("List(configmaps) = %+v", l)
	}
	if l := s.List("nodes"); len(l) != 0 {
		t.Fatalf("List(unknown kind) = %+v", l)
	}

	if err := s.Delete(KindPod, "kube-system", "dns"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(KindPod, "kube-system", "dns"); err != nil {
		t.Fatalf("deleting a missing record: %v", err)
	}
	if err := s.Delete(KindSecret, "nowhere", "nothing"); err != nil {
		t.Fatalf("deleting a missing record: %v", err)
	}
	if _, ok := s.Get(KindPod, "kube-system", "dns"); ok {
		t.Fatal("Get after Delete found the record")
	}
	if _, err := os.Stat(recPath(s, KindPod, "kube-system", "dns")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("record file still present after Delete: %v", err)
	}

	before := snapshot(s)
	s2 := mustOpen(t, root)
	if after := snapshot(s2); !equalRecords(before, after) {
		t.Fatalf("reopen changed the records:\nbefore %+v\nafter  %+v", before, after)
	}
	if s2.Revision() != 7 {
		t.Fatalf("Revision after reopen = %d, want 7", s2.Revision())
	}
	if q := s2.Quarantined(); len(q) != 0 {
		t.Fatalf("clean reopen quarantined %+v", q)
	}
}

func TestEnvelopeFormat(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	data := "{\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": \"web\"}\n}"
	// Surrounding whitespace (as json.Encoder adds) is dropped, the rest is kept byte for byte.
	r := mustPut(t, s, KindPod, "default", "web", "\n "+data+"\n")
	if string(r.Data) != data {
		t.Fatalf("Data = %q, want %q", r.Data, data)
	}
	raw, err := os.ReadFile(recPath(s, KindPod, "default", "web"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(data)) {
		t.Fatalf("object not embedded verbatim:\n%s", raw)
	}
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("envelope is not JSON: %v\n%s", err, raw)
	}
	want := map[string]any{
		"formatVersion": 1.0, "kind": "pods", "namespace": "default", "name": "web",
		"revision": 1.0, "sha256": checksum([]byte(data)),
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("envelope[%s] = %v, want %v", k, env[k], v)
		}
	}
	if o, ok := env["object"].(map[string]any); !ok || o["kind"] != "Pod" {
		t.Errorf("envelope object = %v", env["object"])
	}

	// The caller's slices are not shared with the store.
	in := []byte(obj("x", "1"))
	mustPut(t, s, KindPod, "default", "x", string(in))
	in2 := bytes.Clone(in)
	r2, err := s.Put(KindPod, "default", "y", in2)
	if err != nil {
		t.Fatal(err)
	}
	in2[0], r2.Data[0] = 'X', 'X'
	g, _ := s.Get(KindPod, "default", "y")
	g.Data[1] = 'X'
	if g2, _ := s.Get(KindPod, "default", "y"); string(g2.Data) != string(in) {
		t.Fatalf("stored data was mutated through a caller slice: %s", g2.Data)
	}
}

func TestTornWrite(t *testing.T) {
	root := t.TempDir()
	s := mustOpen(t, root)
	mustPut(t, s, KindPod, "default", "keep", obj("keep", "1"))
	mustPut(t, s, KindSecret, "default", "keep", obj("keep", "1"))
	mustPut(t, s, KindPod, "default", "torn", obj("torn", "1"))
	before := s.Revision()

	// A torn write that never got renamed: leftover temp file.
	nsDir := filepath.Join(s.Dir(), "pods", "default")
	leftover := filepath.Join(nsDir, ".new.json.tmp-12345")
	if err := os.WriteFile(leftover, []byte(`{"formatVersion":1,"ki`), 0o600); err != nil {
		t.Fatal(err)
	}
	revTmp := filepath.Join(s.Dir(), ".revision.tmp-999")
	if err := os.WriteFile(revTmp, []byte("12"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A final file that is truncated (what a non-atomic writer would leave).
	p := recPath(s, KindPod, "default", "torn")
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, orig[:len(orig)/2], 0o600); err != nil {
		t.Fatal(err)
	}

	s2 := mustOpen(t, root)
	for _, f := range []string{leftover, revTmp} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("leftover temp file %s not removed: %v", f, err)
		}
	}
	q := s2.Quarantined()
	if len(q) != 1 {
		t.Fatalf("Quarantined() = %+v, want exactly the truncated file", q)
	}
	if base := filepath.Base(q[0].Path); !strings.HasPrefix(base, "pods_default_torn_") || !strings.HasSuffix(base, ".json") ||
		filepath.Dir(q[0].Path) != filepath.Join(root, "quarantine") {
		t.Errorf("quarantine path %s", q[0].Path)
	}
	if !strings.Contains(q[0].Reason, p) {
		t.Errorf("reason %q does not name the original path", q[0].Reason)
	}
	if moved, err := os.ReadFile(q[0].Path); err != nil || !bytes.Equal(moved, orig[:len(orig)/2]) {
		t.Errorf("quarantined content changed: %v", err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("truncated file still in the store: %v", err)
	}
	if _, ok := s2.Get(KindPod, "default", "torn"); ok {
		t.Error("truncated record is served")
	}
	for _, k := range []Kind{KindPod, KindSecret} {
		if r, ok := s2.Get(k, "default", "keep"); !ok || string(r.Data) != obj("keep", "1") {
			t.Errorf("intact %s record lost: %+v %v", k, r, ok)
		}
	}
	if s2.Revision() != before {
		t.Errorf("Revision() = %d, want %d", s2.Revision(), before)
	}
	// The store stays usable for that name, and the quarantine persists.
	mustPut(t, s2, KindPod, "default", "torn", obj("torn", "2"))
	s3 := mustOpen(t, root)
	if len(s3.Quarantined()) != 0 {
		t.Errorf("quarantine reported again: %+v", s3.Quarantined())
	}
	if _, err := os.Stat(q[0].Path); err != nil {
		t.Errorf("quarantined file gone: %v", err)
	}
}

func TestCorruptFilesQuarantined(t *testing.T) {
	good := obj("x", "1")
	envelopeFor := func(mut func(m map[string]any)) []byte {
		m := map[string]any{
			"formatVersion": 1, "kind": "pods", "namespace": "ns", "name": "x",
			"revision": 3, "sha256": checksum([]byte(good)), "object": json.RawMessage(good),
		}
		mut(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name    string
		content []byte
		reason  string
	}{
		{"bad checksum", envelopeFor(func(m map[string]any) { m["object"] = json.RawMessage(obj("x", "tampered")) }), "sha256 mismatch"},
		{"wrong checksum field", envelopeFor(func(m map[string]any) { m["sha256"] = strings.Repeat("0", 64) }), "sha256 mismatch"},
		{"empty file", nil, "unparsable"},
		{"garbage", []byte("\x00\x01garbage"), "unparsable"},
		{"truncated", envelopeFor(func(map[string]any) {})[:40], "unparsable"},
		{"not an object", []byte(`[1,2,3]`), "unparsable"},
		{"future version", envelopeFor(func(m map[string]any) { m["formatVersion"] = 2 }), "unsupported formatVersion 2"},
		{"wrong identity", envelopeFor(func(m map[string]any) { m["name"] = "y" }), "does not match its path"},
		{"missing object", envelopeFor(func(m map[string]any) { delete(m, "object") }), "object"},
		{"legacy non-object", []byte(`"just a string"`), "unparsable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			s := mustOpen(t, root)
			mustPut(t, s, KindPod, "ns", "other", obj("other", "1"))
			p := recPath(s, KindPod, "ns", "x")
			if err := os.WriteFile(p, tc.content, 0o600); err != nil {
				t.Fatal(err)
			}
			s2 := mustOpen(t, root)
			q := s2.Quarantined()
			if len(q) != 1 || !strings.Contains(q[0].Reason, tc.reason) {
				t.Fatalf("Quarantined() = %+v, want one with reason containing %q", q, tc.reason)
			}
			if b, err := os.ReadFile(q[0].Path); err != nil || !bytes.Equal(b, tc.content) {
				t.Fatalf("quarantined file: %v", err)
			}
			if _, ok := s2.Get(KindPod, "ns", "x"); ok {
				t.Fatal("corrupt record served")
			}
			if r, ok := s2.Get(KindPod, "ns", "other"); !ok || string(r.Data) != obj("other", "1") {
				t.Fatal("intact record lost")
			}
		})
	}
}

func TestQuarantinedRevisionStillCounts(t *testing.T) {
	root := t.TempDir()
	s := mustOpen(t, root)
	mustPut(t, s, KindPod, "ns", "a", obj("a", "1"))
	mustPut(t, s, KindPod, "ns", "b", obj("b", "1")) // revision 2, the highest
	p := recPath(s, KindPod, "ns", "b")
	raw, _ := os.ReadFile(p)
	raw = bytes.Replace(raw, []byte(`"v":"1"`), []byte(`"v":"X"`), 1) // checksum mismatch, still parsable
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, root)
	if len(s2.Quarantined()) != 1 {
		t.Fatalf("Quarantined() = %+v", s2.Quarantined())
	}
	if s2.Revision() != 2 {
		t.Fatalf("Revision() = %d, want 2 (from the quarantined envelope)", s2.Revision())
	}
	// And it was persisted, so it survives the next restart.
	if s3 := mustOpen(t, root); s3.Revision() != 2 {
		t.Fatalf("Revision() after second reopen = %d, want 2", s3.Revision())
	}
}

func TestLegacyV0Migration(t *testing.T) {
	root := t.TempDir()
	s := mustOpen(t, root)
	mustPut(t, s, KindPod, "default", "new", obj("new", "1"))
	mustPut(t, s, KindPod, "default", "new2", obj("new2", "1"))

	legacy := "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"data\":{\"k\":\"v\"}}"
	dir := filepath.Join(s.Dir(), "configmaps", "legacy-ns")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "old.json")
	if err := os.WriteFile(p, []byte(legacy+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	s2 := mustOpen(t, root)
	if q := s2.Quarantined(); len(q) != 0 {
		t.Fatalf("legacy file quarantined: %+v", q)
	}
	r, ok := s2.Get(KindConfigMap, "legacy-ns", "old")
	if !ok || string(r.Data) != legacy {
		t.Fatalf("legacy record = %+v, %v", r, ok)
	}
	if r.Revision != 3 || s2.Revision() != 3 {
		t.Fatalf("legacy revision = %d, store %d, want 3", r.Revision, s2.Revision())
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil || env.FormatVersion != 1 || env.Kind != KindConfigMap ||
		env.Namespace != "legacy-ns" || env.Name != "old" || env.Revision != 3 || string(env.Object) != legacy {
		t.Fatalf("file not rewritten as v1 (%v):\n%s", err, raw)
	}

	s3 := mustOpen(t, root)
	if r3, ok := s3.Get(KindConfigMap, "legacy-ns", "old"); !ok || r3.Revision != 3 || string(r3.Data) != legacy {
		t.Fatalf("after reopen: %+v %v", r3, ok)
	}
	if s3.Revision() != 3 || len(s3.Quarantined()) != 0 {
		t.Fatalf("after reopen: revision %d, quarantined %+v", s3.Revision(), s3.Quarantined())
	}
}

func TestRevisionMonotonic(t *testing.T) {
	tests := []struct {
		name  string
		steps func(t *testing.T, s *Store)
		want  uint64
	}{
		{"puts only", func(t *testing.T, s *Store) {
			mustPut(t, s, KindPod, "ns", "a", obj("a", "1"))
			mustPut(t, s, KindPod, "ns", "b", obj("b", "1"))
		}, 2},
		{"delete highest", func(t *testing.T, s *Store) {
			mustPut(t, s, KindPod, "ns", "a", obj("a", "1"))
			mustPut(t, s, KindPod, "ns", "b", obj("b", "1"))
			mustPut(t, s, KindSecret, "ns", "c", obj("c", "1"))
			if err := s.Delete(KindSecret, "ns", "c"); err != nil {
				t.Fatal(err)
			}
		}, 3},
		{"delete everything", func(t *testing.T, s *Store) {
			for i := range 5 {
				mustPut(t, s, KindConfigMap, "ns", fmt.Sprint("c", i), obj("c", "1"))
			}
			for i := range 5 {
				if err := s.Delete(KindConfigMap, "ns", fmt.Sprint("c", i)); err != nil {
					t.Fatal(err)
				}
			}
		}, 5},
		{"overwrite then delete", func(t *testing.T, s *Store) {
			mustPut(t, s, KindPod, "ns", "a", obj("a", "1"))
			mustPut(t, s, KindPod, "ns", "a", obj("a", "2"))
			mustPut(t, s, KindPod, "ns", "a", obj("a", "3"))
			if err := s.Delete(KindPod, "ns", "a"); err != nil {
				t.Fatal(err)
			}
		}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			s := mustOpen(t, root)
			tc.steps(t, s)
			if s.Revision() != tc.want {
				t.Fatalf("Revision() = %d, want %d", s.Revision(), tc.want)
			}
			for i := range 3 { // several restarts, each followed by a write
				s = mustOpen(t, root)
				if got, want := s.Revision(), tc.want+uint64(i); got != want {
					t.Fatalf("restart %d: Revision() = %d, want %d", i, got, want)
				}
				r := mustPut(t, s, KindPod, "ns", "after", obj("after", fmt.Sprint(i)))
				if r.Revision != tc.want+uint64(i)+1 {
					t.Fatalf("restart %d: Put revision = %d, want %d", i, r.Revision, tc.want+uint64(i)+1)
				}
				if err := s.Delete(KindPod, "ns", "after"); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestCorruptRevisionFile(t *testing.T) {
	root := t.TempDir()
	s := mustOpen(t, root)
	mustPut(t, s, KindPod, "ns", "a", obj("a", "1"))
	mustPut(t, s, KindPod, "ns", "b", obj("b", "1"))
	if err := os.WriteFile(filepath.Join(s.Dir(), "revision"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, root)
	if q := s2.Quarantined(); len(q) != 1 || !strings.Contains(q[0].Reason, "revision counter") {
		t.Fatalf("Quarantined() = %+v", q)
	}
	if s2.Revision() != 2 {
		t.Fatalf("Revision() = %d, want 2", s2.Revision())
	}
	if b, err := os.ReadFile(filepath.Join(s.Dir(), "revision")); err != nil || string(b) != "2\n" {
		t.Fatalf("revision file not rewritten: %q %v", b, err)
	}
}

// faultFS injects an error into one operation kind.
type faultFS struct {
	osFS
	fail   string // "lstat", "lstat-exists", "mkdir", "create", "write", "sync", "rename", "remove", "syncdir"
	synced map[string]int
	lstats int
}

var errInjected = errors.New("injected failure (no space left on device)")

func (f *faultFS) Lstat(p string) (os.FileInfo, error) {
	f.lstats++
	switch f.fail {
	case "lstat":
		return nil, &os.PathError{Op: "lstat", Path: p, Err: syscall.EACCES}
	case "lstat-exists":
		return os.Lstat(filepath.Dir(p)) // every candidate name "exists"
	}
	return f.osFS.Lstat(p)
}

func (f *faultFS) Mkdir(p string, perm os.FileMode) error {
	if f.fail == "mkdir" {
		return errInjected
	}
	return f.osFS.Mkdir(p, perm)
}

func (f *faultFS) CreateTemp(dir, pattern string) (tempFile, error) {
	if f.fail == "create" {
		return nil, errInjected
	}
	tf, err := f.osFS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &faultFile{tempFile: tf, fs: f}, nil
}

func (f *faultFS) Rename(o, n string) error {
	if f.fail == "rename" {
		return errInjected
	}
	return f.osFS.Rename(o, n)
}

func (f *faultFS) Remove(p string) error {
	if f.fail == "remove" {
		return errInjected
	}
	return f.osFS.Remove(p)
}

func (f *faultFS) SyncDir(p string) error {
	if f.fail == "syncdir" {
		return errInjected
	}
	if f.synced == nil {
		f.synced = map[string]int{}
	}
	f.synced[p]++
	return f.osFS.SyncDir(p)
}

type faultFile struct {
	tempFile
	fs *faultFS
}

func (f *faultFile) Write(b []byte) (int, error) {
	if f.fs.fail == "write" {
		n, _ := f.tempFile.Write(b[:len(b)/2]) // a short write, as on a full disk
		return n, errInjected
	}
	return f.tempFile.Write(b)
}

func (f *faultFile) Sync() error {
	if f.fs.fail == "sync" {
		return errInjected
	}
	return f.tempFile.Sync()
}

func TestPutFailureKeepsPrevious(t *testing.T) {
	tests := []struct {
		fail    string
		newNS   bool // write into a namespace whose directory does not exist yet
		consume bool // whether the failed Put consumes its revision
	}{
		{fail: "create"},
		{fail: "write"},
		{fail: "sync"},
		{fail: "rename"},
		{fail: "syncdir", consume: true},
		{fail: "mkdir", newNS: true},
		{fail: "syncdir", newNS: true},
		{fail: "create", newNS: true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/newNS=%v", tc.fail, tc.newNS), func(t *testing.T) {
			root := t.TempDir()
			ffs := &faultFS{}
			s, err := openFS(root, ffs)
			if err != nil {
				t.Fatal(err)
			}
			old := mustPut(t, s, KindSecret, "ns", "db", obj("db", "old"))
			mustPut(t, s, KindPod, "ns", "other", obj("other", "1"))
			before := snapshot(s)
			rev := s.Revision()

			ns := "ns"
			if tc.newNS {
				ns = "fresh"
			}
			ffs.fail = tc.fail
			_, err = s.Put(KindSecret, ns, "db", []byte(obj("db", "new")))
			if err == nil {
				t.Fatal("Put succeeded despite the injected failure")
			}
			if !errors.Is(err, errInjected) {
				t.Fatalf("error does not wrap the cause: %v", err)
			}
			if !strings.Contains(err.Error(), root) {
				t.Errorf("error does not name the path: %v", err)
			}
			if after := snapshot(s); !equalRecords(before, after) {
				t.Fatalf("in-memory view changed:\n%+v\n%+v", before, after)
			}
			wantRev := rev
			if tc.consume {
				wantRev++
			}
			if s.Revision() != wantRev {
				t.Errorf("Revision() = %d, want %d", s.Revision(), wantRev)
			}
			ffs.fail = ""
			if tf := tempFiles(t, root); len(tf) != 0 {
				t.Errorf("temp files left behind: %v", tf)
			}

			// What is on disk is still the old state.
			s2 := mustOpen(t, root)
			if got, ok := s2.Get(KindSecret, "ns", "db"); !ok || string(got.Data) != string(old.Data) || got.Revision != old.Revision {
				t.Fatalf("on disk after failed Put: %+v %v", got, ok)
			}
			if _, ok := s2.Get(KindSecret, "fresh", "db"); ok {
				t.Fatal("failed Put into a new namespace is on disk")
			}
			if len(s2.Quarantined()) != 0 {
				t.Fatalf("quarantined: %+v", s2.Quarantined())
			}
			// The store keeps working once the fault clears, and a namespace
			// directory left behind by the failed Put is still made durable.
			ffs.synced = nil
			r := mustPut(t, s, KindSecret, ns, "db", obj("db", "new"))
			if r.Revision != wantRev+1 {
				t.Errorf("next revision = %d, want %d", r.Revision, wantRev+1)
			}
			if kd := filepath.Join(s.Dir(), "secrets"); tc.newNS && tc.fail == "syncdir" && ffs.synced[kd] == 0 {
				t.Errorf("kind directory %s not fsynced after creating %s", kd, ns)
			}
		})
	}
}

func TestPutFailsWhenNamespacePathIsAFile(t *testing.T) {
	root := t.TempDir()
	s := mustOpen(t, root)
	mustPut(t, s, KindPod, "ns", "a", obj("a", "1"))
	// A real (not injected) failure: something that is not a directory sits
	// where the namespace directory should be, so no write can succeed.
	if err := os.WriteFile(filepath.Join(s.Dir(), "pods", "blocked"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(KindPod, "blocked", "a", []byte(obj("a", "2"))); err == nil {
		t.Fatal("Put succeeded")
	}
	// Also a record path that is a directory: rename over it fails.
	if err := os.MkdirAll(filepath.Join(s.Dir(), "pods", "ns", "dir.json", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(KindPod, "ns", "dir", []byte(obj("dir", "2"))); err == nil {
		t.Fatal("Put over a directory succeeded")
	}
	if r, ok := s.Get(KindPod, "ns", "a"); !ok || r.Revision != 1 || s.Revision() != 1 {
		t.Fatalf("store changed: %+v %v rev %d", r, ok, s.Revision())
	}
	if tf := tempFiles(t, root); len(tf) != 0 {
		t.Errorf("temp files left behind: %v", tf)
	}
	s2 := mustOpen(t, root)
	if l := s2.List(KindPod); len(l) != 1 || l[0].Name != "a" {
		t.Fatalf("after reopen: %+v", l)
	}
}

func TestDeleteFailureKeepsRecord(t *testing.T) {
	for _, fail := range []string{"create", "remove", "syncdir"} {
		t.Run(fail, func(t *testing.T) {
			root := t.TempDir()
			ffs := &faultFS{}
			s, err := openFS(root, ffs)
			if err != nil {
				t.Fatal(err)
			}
			mustPut(t, s, KindPod, "ns", "a", obj("a", "1"))
			r := mustPut(t, s, KindPod, "ns", "b", obj("b", "1"))
			ffs.fail = fail // "create" makes the revision-file write fail
			if err := s.Delete(KindPod, "ns", "b"); !errors.Is(err, errInjected) {
				t.Fatalf("Delete error = %v", err)
			}
			ffs.fail = ""
			if got, ok := s.Get(KindPod, "ns", "b"); !ok || got.Revision != r.Revision {
				t.Fatalf("record no longer served: %+v %v", got, ok)
			}
			s2 := mustOpen(t, root)
			if got, ok := s2.Get(KindPod, "ns", "b"); !ok || string(got.Data) != string(r.Data) {
				t.Fatalf("record not on disk after failed Delete: %+v %v", got, ok)
			}
			if err := s.Delete(KindPod, "ns", "b"); err != nil {
				t.Fatalf("Delete after fault cleared: %v", err)
			}
		})
	}
}

func TestPermissions(t *testing.T) {
	root := t.TempDir()
	// A pre-existing, too permissive store directory is tightened.
	if err := os.MkdirAll(filepath.Join(root, "checkpoint", "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "checkpoint", "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, root)
	mustPut(t, s, KindSecret, "ns", "tls", obj("tls", "1"))
	mustPut(t, s, KindPod, "ns", "p", obj("p", "1"))
	for _, d := range []string{
		s.Dir(), filepath.Join(root, "quarantine"),
		filepath.Join(s.Dir(), "secrets"), filepath.Join(s.Dir(), "pods"), filepath.Join(s.Dir(), "configmaps"),
		filepath.Join(s.Dir(), "secrets", "ns"),
	} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 || !fi.IsDir() {
			t.Errorf("%s mode %v, want drwx------", d, fi.Mode())
		}
	}
	for _, f := range []string{recPath(s, KindSecret, "ns", "tls"), recPath(s, KindPod, "ns", "p")} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want -rw-------", f, fi.Mode())
		}
	}
}

func TestInvalidInput(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	good := []byte(obj("x", "1"))
	tests := []struct {
		name     string
		kind     Kind
		ns, n    string
		data     []byte
		errMatch string
	}{
		{"empty namespace", KindPod, "", "x", good, "namespace"},
		{"empty name", KindPod, "ns", "", good, "name"},
		{"slash in name", KindPod, "ns", "a/b", good, "'/'"},
		{"slash in namespace", KindPod, "a/b", "x", good, "'/'"},
		{"dotdot name", KindPod, "ns", "..", good, "'..'"},
		{"dotdot namespace", KindPod, "..", "x", good, "'..'"},
		{"dotdot inside", KindPod, "ns", "a..b", good, "'..'"},
		{"dot", KindPod, "ns", ".", good, "'.'"},
		{"hidden", KindPod, "ns", ".x", good, "'.'"},
		{"too long", KindPod, "ns", strings.Repeat("a", 251), good, "longer"},
		{"unknown kind", "nodes", "ns", "x", good, "kind"},
		{"empty data", KindPod, "ns", "x", nil, "empty"},
		{"not json", KindPod, "ns", "x", []byte("{nope"), "JSON"},
		{"not an object", KindPod, "ns", "x", []byte("[1]"), "JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Put(tc.kind, tc.ns, tc.n, tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.errMatch) {
				t.Fatalf("Put error = %v, want one mentioning %q", err, tc.errMatch)
			}
			if tc.data != nil && string(tc.data) == string(good) {
				if err := s.Delete(tc.kind, tc.ns, tc.n); err == nil {
					t.Fatal("Delete accepted an invalid identity")
				}
			}
			if _, ok := s.Get(tc.kind, tc.ns, tc.n); ok {
				t.Fatal("Get found an invalid identity")
			}
		})
	}
	if s.Revision() != 0 {
		t.Fatalf("rejected Puts consumed revisions: %d", s.Revision())
	}
	if _, err := s.Put(KindPod, "ns", strings.Repeat("a", 250), good); err != nil {
		t.Fatalf("250-byte name: %v", err)
	}
	if _, err := Open(""); err == nil {
		t.Fatal("Open(\"\") succeeded")
	}
}

func TestConcurrent(t *testing.T) {
	root := t.TempDir()
	s := mustOpen(t, root)
	const workers, per = 8, 10
	var wg sync.WaitGroup
	revs := make(chan uint64, workers*per)
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				name := fmt.Sprintf("p%d-%d", w, i)
				r, err := s.Put(KindPod, "ns", name, []byte(obj(name, "1")))
				if err != nil {
					t.Error(err)
					return
				}
				revs <- r.Revision
				s.Get(KindPod, "ns", name)
				s.List(KindPod)
				if i%2 == 0 {
					if err := s.Delete(KindPod, "ns", name); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	close(revs)
	seen := map[uint64]bool{}
	for r := range revs {
		if seen[r] {
			t.Fatalf("revision %d assigned twice", r)
		}
		seen[r] = true
	}
	if s.Revision() != workers*per || len(s.List(KindPod)) != workers*per/2 {
		t.Fatalf("Revision %d, %d pods", s.Revision(), len(s.List(KindPod)))
	}
	if s2 := mustOpen(t, root); !equalRecords(snapshot(s), snapshot(s2)) || s2.Revision() != s.Revision() {
		t.Fatal("reopen differs")
	}
}

func BenchmarkPut(b *testing.B) {
	s := mustOpen(b, b.TempDir())
	// A ~2 KiB pod-like object.
	data := []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default"},"spec":{"pad":%q}}`,
		strings.Repeat("x", 2048-110)))
	if len(data) < 2000 || len(data) > 2100 {
		b.Fatalf("object is %d bytes", len(data))
	}
	b.SetBytes(int64(len(data)))
	for i := 0; b.Loop(); i++ {
		if _, err := s.Put(KindPod, "default", fmt.Sprint("web-", i%64), data); err != nil {
			b.Fatal(err)
		}
	}
}

func TestInspectChangesNothing(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(KindPod, "default", "a", []byte(`{"kind":"Pod"}`)); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(root, "checkpoint", "pods", "default", "b.json")
	if err := os.WriteFile(bad, []byte(`{"formatVersion":1,"revision":9`), 0o600); err != nil {
		t.Fatal(err)
	}
	recs, damaged, err := Inspect(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Name != "a" || string(recs[0].Data) != `{"kind":"Pod"}` {
		t.Fatalf("records %+v", recs)
	}
	if len(damaged) != 1 || damaged[0].Path != bad {
		t.Fatalf("damaged %+v", damaged)
	}
	if _, err := os.Stat(bad); err != nil {
		t.Fatal("Inspect must not move damaged files")
	}
}
