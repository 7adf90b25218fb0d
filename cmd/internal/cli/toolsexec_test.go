package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindTools(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "bootlet")
	beside := filepath.Join(dir, toolsBinary)
	onPath := func(string) (string, error) { return "/usr/local/bin/" + toolsBinary, nil }
	notOnPath := func(string) (string, error) { return "", errors.New("not found") }

	// Nothing beside bootlet: PATH, else an error naming the verb and the binary.
	if got, err := findTools("render", self, onPath); err != nil || got != "/usr/local/bin/"+toolsBinary {
		t.Errorf("only on PATH: %q, %v", got, err)
	}
	if _, err := findTools("render", self, notOnPath); err == nil || !strings.Contains(err.Error(), "bootlet render runs "+toolsBinary) || !strings.Contains(err.Error(), dir) {
		t.Errorf("missing everywhere: %v", err)
	}
	// A non-executable file beside bootlet is not used.
	if err := os.WriteFile(beside, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := findTools("describe", self, onPath); err != nil || got != "/usr/local/bin/"+toolsBinary {
		t.Errorf("not executable beside bootlet: %q, %v", got, err)
	}
	// An executable beside bootlet wins over PATH.
	if err := os.Chmod(beside, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findTools("describe", self, onPath); err != nil || got != beside {
		t.Errorf("beside bootlet: %q, %v, want %q", got, err, beside)
	}
}
