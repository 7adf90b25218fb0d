package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestReferenceIsGenerated: docs/reference is what the code generates, so
// a flag, a verb or a configuration field cannot change without its page.
func TestReferenceIsGenerated(t *testing.T) {
	committed := filepath.Join("..", "..", "..", "docs", "reference")
	fresh := t.TempDir()
	if err := write(fresh, filepath.Join("..", "..", "..", "config", "types.go")); err != nil {
		t.Fatal(err)
	}
	want, got := readTree(t, fresh), readTree(t, committed)
	for name, data := range want {
		if old, ok := got[name]; !ok {
			t.Errorf("docs/reference/%s is missing: run make docs", name)
		} else if !bytes.Equal(old, data) {
			t.Errorf("docs/reference/%s differs from what the code generates: run make docs", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/reference/%s is not generated any more: run make docs", name)
		}
	}
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = data
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
