package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// TestGenerateFixture: each plot comes from the newest campaign with its
// ratios; a file without any is passed over for an older one, or reported.
func TestGenerateFixture(t *testing.T) {
	out := t.TempDir()
	written, missing, err := generate(filepath.Join("testdata", "data"), "fixture", out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range written {
		names = append(names, filepath.Base(w))
	}
	if want := []string{"bench-pods.svg", "bench-footprint.svg"}; !reflect.DeepEqual(names, want) {
		t.Errorf("written %q, want %q", names, want)
	}
	if want := []string{"recovery.json", "bootstrap.json", "handoff.json"}; !reflect.DeepEqual(missing, want) {
		t.Errorf("missing %q, want %q", missing, want)
	}
	pods, err := os.ReadFile(filepath.Join(out, "bench-pods.svg"))
	if err != nil {
		t.Fatal(err)
	}
	// The newer campaign's floor ratio, not the older one's two ratios.
	if s := string(pods); !strings.Contains(s, "fixture/2026-01-02/pods.json") || !strings.Contains(s, "bootlet / floor: 1.10") || strings.Contains(s, "bootlet / kubelet: 0.50") {
		t.Errorf("bench-pods.svg not drawn from the newest campaign:\n%s", s)
	}
	fp, err := os.ReadFile(filepath.Join(out, "bench-footprint.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(fp); !strings.Contains(s, "fixture/2026-01-01/footprint.json") || !strings.Contains(s, "bootlet / kubelet: 0.50") {
		t.Errorf("bench-footprint.svg not drawn from the older campaign:\n%s", s)
	}
}

// TestPlotsAreGenerated: docs/images/bench-*.svg are what the committed data
// gives, so a plot cannot be edited by hand or outlive its data: run make docs.
func TestPlotsAreGenerated(t *testing.T) {
	docs := filepath.Join("..", "..", "docs")
	fresh := t.TempDir()
	written, _, err := generate(filepath.Join(docs, "records", "data"), "docs/records/data", fresh)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := filepath.Glob(filepath.Join(docs, "images", "bench-*.svg"))
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, w := range written {
		want = append(want, filepath.Base(w))
	}
	for _, c := range committed {
		got = append(got, filepath.Base(c))
	}
	sort.Strings(want)
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("docs/images has %q, the data gives %q: run make docs (and remove a plot no data gives)", got, want)
	}
	for _, name := range want {
		fresh, _ := os.ReadFile(filepath.Join(fresh, name))
		old, err := os.ReadFile(filepath.Join(docs, "images", name))
		if err == nil && !bytes.Equal(old, fresh) {
			t.Errorf("docs/images/%s differs from what the data gives: run make docs", name)
		}
	}
}
