package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteFilesAtomic: every file in place with its content and mode, in
// directories made for them, and no temp left behind.
func TestWriteFilesAtomic(t *testing.T) {
	root := t.TempDir()
	files := []AtomicFile{
		{Path: filepath.Join(root, "out", "pki", "ca.crt"), Data: []byte("ca"), Mode: 0o644},
		{Path: filepath.Join(root, "out", "config.yaml"), Data: []byte("config"), Mode: 0o644},
		{Path: filepath.Join(root, "out", "bootstrap.conf"), Data: []byte("token"), Mode: 0o600},
	}
	if err := os.MkdirAll(filepath.Join(root, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files[1].Path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFilesAtomic(files); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != string(f.Data) || fi.Mode().Perm() != f.Mode {
			t.Errorf("%s: %q mode %o, want %q mode %o", f.Path, data, fi.Mode().Perm(), f.Data, f.Mode)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "out", "pki")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("pki/: %v %v, want a 0755 directory", fi, err)
	}
	requireNoTemps(t, root)
}

// TestWriteFilesAtomicAllOrNothing: when one file cannot be staged, no
// file is written, a file there before keeps its content, and the
// directories made for the others are gone.
func TestWriteFilesAtomicAllOrNothing(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(out, "config.yaml")
	if err := os.WriteFile(old, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A regular file where the last file's directory should be.
	blocker := filepath.Join(out, "blocker")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteFilesAtomic([]AtomicFile{
		{Path: filepath.Join(out, "new", "deeper", "ca.crt"), Data: []byte("ca"), Mode: 0o644},
		{Path: old, Data: []byte("new"), Mode: 0o644},
		{Path: filepath.Join(blocker, "bootstrap.conf"), Data: []byte("token"), Mode: 0o600},
	})
	if err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("err = %v, want the blocker's", err)
	}
	if data, _ := os.ReadFile(old); string(data) != "old" {
		t.Errorf("%s = %q, want the old content", old, data)
	}
	if _, err := os.Stat(filepath.Join(out, "new")); !os.IsNotExist(err) {
		t.Errorf("the directory made for the first file is left: %v", err)
	}
	requireNoTemps(t, root)
}

func requireNoTemps(t *testing.T, root string) {
	t.Helper()
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && isTemp(fi.Name()) {
			t.Errorf("temp file left: %s", p)
		}
		return nil
	})
}
